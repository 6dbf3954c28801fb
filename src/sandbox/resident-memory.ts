import { readFileSync } from 'node:fs';

/**
 * Resident memory of a process in MB, from /proc; undefined where /proc is not available (the
 * check it serves is a backstop, so platforms without it simply go without).
 */
export function readResidentMemoryMb(pid: number): number | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch {
    return undefined;
  }
  const match = /^VmRSS:\s+(\d+) kB/m.exec(status);
  return match ? Number(match[1]) / 1024 : undefined;
}
