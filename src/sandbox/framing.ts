// Length-prefixed JSON frames between the host and a sandbox worker process:
//   [u32 byte length][UTF-8 JSON]
// Bulk data (contexts) does not travel here: see context-transfer.ts.

const PREFIX_BYTES = 4;

export function encodeFrame(message: object): Buffer {
  const json = Buffer.from(JSON.stringify(message), 'utf8');
  const frame = Buffer.allocUnsafe(PREFIX_BYTES + json.length);
  frame.writeUInt32LE(json.length, 0);
  json.copy(frame, PREFIX_BYTES);
  return frame;
}

export class FrameDecoder {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private readonly ready: Record<string, unknown>[] = [];

  /** Consumes bytes; complete messages become available through `next()`. */
  push(chunk: Buffer): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    while (this.pendingBytes >= PREFIX_BYTES) {
      const head = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
      const length = head.readUInt32LE(0);
      if (head.length < PREFIX_BYTES + length) {
        this.pending = [head];
        return;
      }
      this.ready.push(JSON.parse(head.toString('utf8', PREFIX_BYTES, PREFIX_BYTES + length)) as Record<string, unknown>);
      const rest = head.subarray(PREFIX_BYTES + length);
      this.pending = rest.length > 0 ? [rest] : [];
      this.pendingBytes = rest.length;
    }
  }

  /** True while the bytes of a frame that has not fully arrived are held. */
  get midFrame(): boolean {
    return this.pendingBytes > 0;
  }

  next(): Record<string, unknown> | undefined {
    return this.ready.shift();
  }
}
