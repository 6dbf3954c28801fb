import { describe, expect, it } from 'vitest';
import { percentile } from '../src/percentile.js';

describe('percentile', () => {
  it('takes the nearest rank: the smallest value with the share at or below it', () => {
    const values = Array.from({ length: 20 }, (_, index) => index + 1);
    expect(percentile(values, 0.5)).toBe(10);
    expect(percentile(values, 0.95)).toBe(19);
    expect(percentile(values, 1)).toBe(20);
    expect(percentile(values, 0)).toBe(1);
    expect(percentile([7], 0.95)).toBe(7);
  });

  it('has no value for no values', () => {
    expect(percentile([], 0.5)).toBeUndefined();
  });
});
