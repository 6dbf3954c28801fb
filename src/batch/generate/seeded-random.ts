// Task sets must come out byte for byte the same from the same seed, on any machine and Node.js
// version, so they use this small generator instead of Math.random.

/** A deterministic stream of random choices. */
export interface SeededRandom {
  /** A float in [0, 1). */
  next(): number;
  /** A whole number in [0, below). */
  below(below: number): number;
  /** A whole number in [low, high], both included. */
  between(low: number, high: number): number;
  pick<T>(items: readonly T[]): T;
}

/**
 * A generator seeded by the parts given (the user's seed, the task's kind and number...): each
 * task draws from a stream of its own, so task 7 is the same whatever --count or the other
 * tasks were. mulberry32 over an FNV-1a hash of the parts: tiny, fast and well spread for this use
 * (never for anything secret).
 */
export function seededRandom(...parts: (string | number)[]): SeededRandom {
  let state = fnv1a(parts.join('\u0000'));
  const next = (): number => {
    state = (state + 0x6d2b79f5) | 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296;
  };
  const below = (limit: number): number => Math.floor(next() * limit);
  return {
    next,
    below,
    between: (low, high) => low + below(high - low + 1),
    pick: (items) => items[below(items.length)]!,
  };
}

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
