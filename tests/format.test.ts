import { describe, expect, it } from 'vitest';
import { formatCount } from '../src/format.js';

describe('formatCount', () => {
  it('groups thousands as en-US does, without loading ICU', () => {
    for (const value of [0, 7, 999, 1_000, 12_345, 100_000, 1_234_567, 50_000_000, 104_857_600, 9_007_199_254_740_991, -1_500]) {
      expect(formatCount(value)).toBe(value.toLocaleString('en-US'));
    }
  });

  it('rounds a count that is not whole (an estimate of tokens)', () => {
    expect(formatCount(1234.6)).toBe('1,235');
  });
});
