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

/**
 * Turns a byte stream back into messages in time linear in its length: chunks wait in a list
 * until a whole frame is there, then are joined once.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private bufferedBytes = 0;
  /** Size of the frame at the front, known once its prefix has arrived. */
  private frameBytes: number | undefined;
  private readonly ready: Record<string, unknown>[] = [];

  /**
   * Consumes bytes; complete messages become available through `next()`. Keeps `chunk` until its
   * frames are complete, so the caller must not reuse that memory.
   */
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bufferedBytes += chunk.length;
    for (;;) {
      if (this.frameBytes === undefined && this.bufferedBytes >= PREFIX_BYTES) this.frameBytes = frameSize(this.peekPrefix());
      if (this.frameBytes === undefined || this.bufferedBytes < this.frameBytes) return;
      this.ready.push(decodeFrame(this.take(this.frameBytes)));
      this.frameBytes = undefined;
    }
  }

  /** True while the bytes of a frame that has not fully arrived are held. */
  get midFrame(): boolean {
    return this.bufferedBytes > 0;
  }

  next(): Record<string, unknown> | undefined {
    return this.ready.shift();
  }

  /** The prefix may span several chunks (a byte-by-byte writer); copies only its bytes then. */
  private peekPrefix(): Buffer {
    const first = this.chunks[0]!;
    if (first.length >= PREFIX_BYTES) return first;
    const prefix = Buffer.allocUnsafe(PREFIX_BYTES);
    let filled = 0;
    for (let index = 0; filled < PREFIX_BYTES; index++) filled += this.chunks[index]!.copy(prefix, filled);
    return prefix;
  }

  /** Removes the first `byteCount` bytes; copies them only when they span chunks. */
  private take(byteCount: number): Buffer {
    let used = 0;
    let covered = 0;
    while (covered < byteCount) covered += this.chunks[used++]!.length;
    const spanned = this.chunks.slice(0, used);
    const taken = used === 1 ? spanned[0]!.subarray(0, byteCount) : Buffer.concat(spanned, byteCount);
    const last = spanned[used - 1]!;
    const rest = last.subarray(last.length - (covered - byteCount));
    this.chunks = rest.length > 0 ? [rest, ...this.chunks.slice(used)] : this.chunks.slice(used);
    this.bufferedBytes -= byteCount;
    return taken;
  }
}

function frameSize(prefix: Buffer): number {
  return PREFIX_BYTES + prefix.readUInt32LE(0);
}

function decodeFrame(frame: Buffer): Record<string, unknown> {
  return JSON.parse(frame.toString('utf8', PREFIX_BYTES)) as Record<string, unknown>;
}
