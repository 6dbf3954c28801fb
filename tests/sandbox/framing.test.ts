import { describe, expect, it } from 'vitest';
import { encodeFrame, FrameDecoder } from '../../src/sandbox/framing.js';

describe('frames between host and worker', () => {
  it('decodes messages split across chunks at every possible boundary', () => {
    const messages = [{ type: 'a', text: 'héllo 🎉' }, { type: 'b', n: 1 }, { type: 'c', list: [1, 2, 3] }];
    const bytes = Buffer.concat(messages.map((message) => encodeFrame(message)));
    for (let split = 1; split < bytes.length; split++) {
      const decoder = new FrameDecoder();
      decoder.push(bytes.subarray(0, split));
      decoder.push(bytes.subarray(split));
      const decoded = [];
      for (let message = decoder.next(); message; message = decoder.next()) decoded.push(message);
      expect(decoded, `split at ${split}`).toEqual(messages);
    }
  });

  it('decodes byte by byte', () => {
    const bytes = encodeFrame({ type: 'x', value: 'y'.repeat(300) });
    const decoder = new FrameDecoder();
    for (const byte of bytes) decoder.push(Buffer.from([byte]));
    expect(decoder.next()).toEqual({ type: 'x', value: 'y'.repeat(300) });
    expect(decoder.next()).toBeUndefined();
  });
});
