// Floors for the sandbox figures, measured in the same run: what the same work costs with nothing
// of rlm in the way (a bare Node child process, a bare isolated-vm isolate, a tmpfs file).
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { packageRoot } from '../src/paths.js';
import { median } from './report.js';

const ECHO_SOURCE = 'process.stdin.on("data", (chunk) => process.stdout.write(chunk))';
const ONE_BYTE = Buffer.from([1]);
const SLICE_CHARS = 1 << 22;

/** VmRSS or VmHWM of a live process, from /proc. */
export function procStatusMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]) / 1024;
}

/** A bare Node child process that echoes every byte it reads: the floor of any host <-> worker hop. */
export class EchoChild {
  private constructor(private readonly child: ChildProcessByStdio<Writable, Readable, null>) {}

  /** Spawns one and times it from spawn to its first echo. */
  static async start(): Promise<{ echo: EchoChild; startMs: number }> {
    const started = performance.now();
    const echo = new EchoChild(spawn(process.execPath, ['-e', ECHO_SOURCE], { stdio: ['pipe', 'pipe', 'inherit'] }));
    await echo.exchange(1);
    return { echo, startMs: performance.now() - started };
  }

  /** Per message: `messages` single bytes, each sent once the last one has come back. */
  async oneAtATimeMs(messages: number): Promise<number> {
    const started = performance.now();
    for (let i = 0; i < messages; i++) await this.exchange(1);
    return (performance.now() - started) / messages;
  }

  /** Per message: `messages` single bytes written at once, until all have come back. */
  async allInFlightMs(messages: number): Promise<number> {
    const started = performance.now();
    await this.exchange(messages);
    return (performance.now() - started) / messages;
  }

  residentMb(): number {
    return procStatusMb(this.child.pid!, 'VmRSS');
  }

  stop(): void {
    this.child.kill();
  }

  private exchange(messages: number): Promise<void> {
    return new Promise((resolve) => {
      let received = 0;
      const onData = (chunk: Buffer) => {
        received += chunk.length;
        if (received < messages) return;
        this.child.stdout.off('data', onData);
        resolve();
      };
      this.child.stdout.on('data', onData);
      for (let i = 0; i < messages; i++) this.child.stdin.write(ONE_BYTE);
    });
  }
}

/**
 * A fresh process's first isolate (create + context + eval '1'), timed inside a process that has
 * already loaded isolated-vm: what a warm sandbox worker must do at least, without the host hop.
 * In a child, because isolated-vm needs --no-node-snapshot on Node 20.
 */
export function bareIsolateMs(samples: number): number {
  const source = `
    const ivm = require('isolated-vm');
    (async () => {
      const started = performance.now();
      const isolate = new ivm.Isolate({ memoryLimit: 128 });
      const context = await isolate.createContext();
      await context.eval('1');
      console.log(performance.now() - started);
    })();
  `;
  const times = Array.from({ length: samples }, () => {
    const result = spawnSync(process.execPath, ['--no-node-snapshot', '-e', source], { cwd: packageRoot(), encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`bare isolate failed: ${result.stderr}`);
    return Number(result.stdout);
  });
  return median(times);
}

/** The text written to a tmpfs file and read back as a string, the least a context load must do. */
export function fileRoundTripMs(text: string, samples: number): number {
  const path = join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), `rlm-bench-${process.pid}`);
  const times = Array.from({ length: samples }, () => {
    const started = performance.now();
    writeInSlices(path, text);
    if (readFileSync(path, 'latin1').length !== text.length) throw new Error('file round trip lost text');
    return performance.now() - started;
  });
  rmSync(path, { force: true });
  return median(times);
}

// Writing the whole string at once would first encode it into one buffer of its full size.
function writeInSlices(path: string, text: string): void {
  const descriptor = openSync(path, 'w');
  try {
    for (let start = 0; start < text.length; start += SLICE_CHARS) writeSync(descriptor, text.slice(start, start + SLICE_CHARS));
  } finally {
    closeSync(descriptor);
  }
}
