/** Durations as people read them in messages: "250 ms", "2 s", "1.5 s". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  return Number.isInteger(seconds) ? `${seconds} s` : `${seconds.toFixed(1)} s`;
}

/** Sizes as people read them in messages: "512 bytes", "3.2 MB" (MB of 2^20 bytes). */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 2 ** 20) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 2 ** 20).toFixed(1)} MB`;
}

/**
 * Whole numbers as people read them in messages: "1,234,567". Written out rather than with
 * toLocaleString, whose first call loads ICU's locale data: about 15 ms, paid once by every
 * process that builds a system prompt or a message with a count in it.
 */
export function formatCount(value: number): string {
  return Math.round(value)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
