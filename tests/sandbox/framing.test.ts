import { describe, expect, it } from 'vitest';
import { encodeFrame, FrameDecoder, type FramedMessage } from '../../src/sandbox/framing.js';

type Message = FramedMessage & Record<string, unknown>;

function drain(decoder: FrameDecoder<Message>): Message[] {
  const decoded = [];
  for (let message = decoder.next(); message; message = decoder.next()) decoded.push(message);
  return decoded;
}

describe('frames between host and worker', () => {
  const messages: Message[] = [
    { type: 'a', text: 'héllo 🎉' },
    { type: 'b', id: 1, payload: '{"ok":true,"value":"é 🎉 \\" \\\\ \\n"}' },
    { type: 'c', list: [1, 2, 3] },
    { type: 'd', payload: 'ünïcödé 🎉'.repeat(20) },
  ];

  it('decodes messages split across chunks at every possible boundary', () => {
    const bytes = Buffer.concat(messages.map((message) => encodeFrame(message)));
    for (let split = 1; split < bytes.length; split++) {
      const decoder = new FrameDecoder<Message>();
      decoder.push(bytes.subarray(0, split));
      decoder.push(bytes.subarray(split));
      expect(drain(decoder), `split at ${split}`).toEqual(messages);
    }
  });

  it('decodes byte by byte', () => {
    const bytes = Buffer.concat(messages.map((message) => encodeFrame(message)));
    const decoder = new FrameDecoder<Message>();
    for (const byte of bytes) decoder.push(Buffer.from([byte]));
    expect(drain(decoder)).toEqual(messages);
  });

  it('carries a payload as raw UTF-8 beside the JSON header, not escaped into it', () => {
    const payload = '{"ok":true,"value":"a \\"quoted\\" é"}';
    const frame = encodeFrame({ type: 'hostReply', id: 7, payload });
    const header = '{"type":"hostReply","id":7}';
    expect(frame.readUInt32LE(0)).toBe(header.length);
    expect(frame.readUInt32LE(4)).toBe(Buffer.byteLength(payload));
    expect(frame.subarray(8).toString('utf8')).toBe(header + payload);
  });

  it('reads a message sent without a payload, or with an empty one, as having none', () => {
    const decoder = new FrameDecoder<Message>();
    decoder.push(Buffer.concat([encodeFrame({ type: 'plain', id: 1 }), encodeFrame({ type: 'empty', payload: '' })]));
    expect(drain(decoder)).toEqual([{ type: 'plain', id: 1 }, { type: 'empty' }]);
  });

  it('decodes a 64 MB frame pushed in 64 KB chunks in linear time', () => {
    const payload = 'y'.repeat(64 * 2 ** 20);
    const bytes = encodeFrame({ type: 'bulk', payload });
    const decoder = new FrameDecoder<Message>();
    const started = performance.now();
    for (let offset = 0; offset < bytes.length; offset += 2 ** 16) decoder.push(bytes.subarray(offset, offset + 2 ** 16));
    const decoded = decoder.next();
    // Joining everything pending on every push took about 16 s here.
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(decoded?.payload === payload).toBe(true);
  });
});
