// Length-prefixed frames between the host and a sandbox worker process:
//   [u32 header bytes][u32 body bytes][header: UTF-8 JSON][body: raw bytes]
// The JSON header carries the message; the optional body carries bulk data (a context of any size)
// without JSON escaping, and the decoder copies each body byte exactly once.

export interface Frame {
  header: Record<string, unknown>;
  body: Buffer | undefined;
}

const PREFIX_BYTES = 8;

export function encodeFrame(header: object, body?: Buffer): Buffer[] {
  const headerBytes = Buffer.from(JSON.stringify(header), 'utf8');
  const prefix = Buffer.allocUnsafe(PREFIX_BYTES);
  prefix.writeUInt32LE(headerBytes.length, 0);
  prefix.writeUInt32LE(body?.length ?? 0, 4);
  return body && body.length > 0 ? [prefix, headerBytes, body] : [prefix, headerBytes];
}

export class FrameDecoder {
  private readonly prefix = Buffer.allocUnsafe(PREFIX_BYTES);
  private prefixFilled = 0;
  private header: Buffer | undefined;
  private headerFilled = 0;
  private body: Buffer | undefined;
  private bodyFilled = 0;
  private readonly ready: Frame[] = [];

  /** Consumes bytes; complete frames become available through `next()`. */
  push(chunk: Buffer): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.prefixFilled < PREFIX_BYTES) {
        const take = Math.min(PREFIX_BYTES - this.prefixFilled, chunk.length - offset);
        chunk.copy(this.prefix, this.prefixFilled, offset, offset + take);
        this.prefixFilled += take;
        offset += take;
        if (this.prefixFilled < PREFIX_BYTES) return;
        this.header = Buffer.allocUnsafe(this.prefix.readUInt32LE(0));
        const bodyLength = this.prefix.readUInt32LE(4);
        this.body = bodyLength > 0 ? Buffer.allocUnsafe(bodyLength) : undefined;
        this.headerFilled = 0;
        this.bodyFilled = 0;
      }
      const header = this.header!;
      if (this.headerFilled < header.length) {
        const take = Math.min(header.length - this.headerFilled, chunk.length - offset);
        chunk.copy(header, this.headerFilled, offset, offset + take);
        this.headerFilled += take;
        offset += take;
      }
      if (this.body && this.bodyFilled < this.body.length && offset < chunk.length) {
        const take = Math.min(this.body.length - this.bodyFilled, chunk.length - offset);
        chunk.copy(this.body, this.bodyFilled, offset, offset + take);
        this.bodyFilled += take;
        offset += take;
      }
      if (this.headerFilled === header.length && (!this.body || this.bodyFilled === this.body.length)) {
        this.ready.push({ header: JSON.parse(header.toString('utf8')) as Record<string, unknown>, body: this.body });
        this.prefixFilled = 0;
        this.header = undefined;
        this.body = undefined;
      }
    }
  }

  next(): Frame | undefined {
    return this.ready.shift();
  }
}
