import { readdirSync, readFileSync } from 'node:fs';

// What the benchmarks read of other processes, from /proc (Linux).

/** Resident memory of a process in KB; 0 once it has ended. */
export function rssKb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0; // the process ended between listing and reading
  }
}

/** Processes whose parent is `parentPid`, optionally only those whose command line contains `command`. */
export function childPids(parentPid: number, command?: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        // The parent pid is the second field after the command name, which may contain spaces.
        const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        return parent === parentPid && (command === undefined || readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(command));
      } catch {
        return false;
      }
    });
}
