// Looks at processes through /proc (Linux): which sandbox workers a process has.
import { readdirSync, readFileSync } from 'node:fs';

/** /proc/PID/stat from the state (field 3) on; undefined once the process is gone. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/** Sandbox worker processes whose parent is `parentPid` (this test process unless given; the pool keeps spares). */
export function workerPids(parentPid = process.pid): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => Number(statFields(pid)?.[1]) === parentPid && commandLine(pid).includes('sandbox-worker'));
}
