// Frames between the host and a sandbox worker process:
//   [u32 header bytes][u32 payload bytes][header: UTF-8 JSON][payload: UTF-8 text]
// A message's `payload` string (a host call's request, a host reply) travels as raw text beside
// the JSON header, so bulk text is neither escaped into nor parsed out of JSON a second time. An
// empty payload is not sent: it decodes as a message without one.
// Contexts do not travel here at all: see context-transfer.ts.

const PREFIX_BYTES = 8;

/** What a frame carries: a JSON-serializable header with a `type`, and optionally a raw payload. */
export interface FramedMessage {
  type: string;
  payload?: string;
}

export function encodeFrame<Message extends FramedMessage>(message: Message): Buffer {
  const { payload = '', ...header } = message;
  const headerJson = JSON.stringify(header);
  const headerBytes = Buffer.byteLength(headerJson);
  const payloadBytes = Buffer.byteLength(payload);
  const frame = Buffer.allocUnsafe(PREFIX_BYTES + headerBytes + payloadBytes);
  frame.writeUInt32LE(headerBytes, 0);
  frame.writeUInt32LE(payloadBytes, 4);
  frame.write(headerJson, PREFIX_BYTES);
  frame.write(payload, PREFIX_BYTES + headerBytes);
  return frame;
}

/**
 * Turns a byte stream back into messages, in time linear in its length: chunks wait in a list
 * until a whole frame is there, then are joined once. Messages are not validated: both ends are
 * this package's code.
 */
export class FrameDecoder<Message extends FramedMessage> {
  private chunks: Buffer[] = [];
  private bufferedBytes = 0;
  /** Size of the frame at the front, known once its prefix has arrived. */
  private frameBytes: number | undefined;
  private readonly ready: Message[] = [];

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
      this.ready.push(decodeFrame(this.take(this.frameBytes)) as Message);
      this.frameBytes = undefined;
    }
  }

  /** True while the bytes of a frame that has not fully arrived are held. */
  get midFrame(): boolean {
    return this.bufferedBytes > 0;
  }

  next(): Message | undefined {
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
  return PREFIX_BYTES + prefix.readUInt32LE(0) + prefix.readUInt32LE(4);
}

function decodeFrame(frame: Buffer): FramedMessage {
  const headerEnd = PREFIX_BYTES + frame.readUInt32LE(0);
  const message = JSON.parse(frame.toString('utf8', PREFIX_BYTES, headerEnd)) as FramedMessage;
  if (headerEnd < frame.length) message.payload = frame.toString('utf8', headerEnd);
  return message;
}
