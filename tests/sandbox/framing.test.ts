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

  it('decodes a 64 MB frame pushed in 64 KB chunks in linear time', () => {
    const text = 'y'.repeat(64 * 2 ** 20);
    const bytes = encodeFrame({ type: 'bulk', text });
    const decoder = new FrameDecoder();
    const started = performance.now();
    for (let offset = 0; offset < bytes.length; offset += 2 ** 16) decoder.push(bytes.subarray(offset, offset + 2 ** 16));
    const decoded = decoder.next();
    // Joining everything pending on every push took about 16 s here.
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(decoded?.text === text).toBe(true);
  });
});
