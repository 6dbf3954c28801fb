import { ConfigurationError } from '../../errors.js';
import { formatCount } from '../../format.js';

/** Context sizes in characters, decimal: 8k is 8,000 and 1m is 1,000,000. */
export const MIN_CONTEXT_CHARS = 1_000;
export const MAX_CONTEXT_CHARS = 10_000_000;
export const DEFAULT_SIZES = '8k,64k,1m';

const UNITS: Record<string, number> = { '': 1, k: 1_000, m: 1_000_000 };
const HOW_TO_WRITE = 'write sizes as characters with an optional k or m suffix, comma-separated, e.g. 8k,64k,1m';

/** "8k,64k,1m" as numbers of characters; a ConfigurationError saying what to write instead. */
export function parseSizes(text: string): number[] {
  const parts = text.split(',').map((part) => part.trim());
  if (parts.some((part) => part === '')) throw new ConfigurationError(`Sizes "${text}" have an empty entry: ${HOW_TO_WRITE}.`);
  return parts.map(parseSize);
}

function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([km]?)$/i.exec(text);
  if (!match) throw new ConfigurationError(`"${text}" is not a size: ${HOW_TO_WRITE}.`);
  const chars = Math.round(Number(match[1]) * UNITS[match[2]!.toLowerCase()]!);
  if (chars < MIN_CONTEXT_CHARS || chars > MAX_CONTEXT_CHARS) {
    throw new ConfigurationError(`Size ${text} is out of range: write a size from ${formatSize(MIN_CONTEXT_CHARS)} to ${formatSize(MAX_CONTEXT_CHARS)} (${formatCount(MAX_CONTEXT_CHARS)} characters).`);
  }
  return chars;
}

/** 8000 as "8k", 1500000 as "1.5m": the short form used in task ids. */
export function formatSize(chars: number): string {
  if (chars >= 1_000_000 && chars % 10_000 === 0) return `${chars / 1_000_000}m`;
  if (chars >= 1_000 && chars % 10 === 0) return `${chars / 1_000}k`;
  return String(chars);
}
