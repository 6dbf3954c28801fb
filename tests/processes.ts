// Looks at processes through /proc (Linux): which sandbox workers a process has, and whether they still run.
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

/** False once the process has exited, also while it waits as a zombie for its new parent to reap it. */
export function isRunning(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== 'Z' && state !== 'X';
}

/** True once the process is gone from the process table: exited and reaped by its parent, not even a zombie. */
export function isReaped(pid: number): boolean {
  return statFields(pid) === undefined;
}

/** CPU time the process has used, user and system, in ms (Linux counts it in ticks of 10 ms). */
export function cpuMs(pid: number): number {
  const fields = statFields(pid);
  return fields ? (Number(fields[11]) + Number(fields[12])) * 10 : 0;
}

/** Checks `condition` every 50 ms; true as soon as it holds, false when `timeoutMs` passed first. */
export async function eventually(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (performance.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The sandbox workers of `parentPid`, once one of them has spent `busyMs` of CPU time: a block is
 * spinning in it then, past the hundred or so milliseconds a worker needs to start.
 */
export async function workersOnceOneSpins(parentPid: number, busyMs = 500): Promise<number[]> {
  const spinning = await eventually(() => workerPids(parentPid).some((pid) => cpuMs(pid) >= busyMs), 8_000);
  if (!spinning) throw new Error(`no sandbox worker of process ${parentPid} started spinning`);
  return workerPids(parentPid);
}

/** Kills what a failed test left running, so an orphan does not burn a core for the rest of the suite. */
export function killSurvivors(pids: number[]): void {
  for (const pid of pids.filter(isRunning)) process.kill(pid, 'SIGKILL');
}
