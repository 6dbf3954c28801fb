import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { packageRoot } from '../../src/paths.js';
import type { FakeReply, FakeRequest } from '../../src/testing.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

export const BIN = join(packageRoot(), 'bin', 'rlm.js');
export const scratch = tempFolder('rlm-cli-');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real `rlm` binary with an environment holding only PATH and HOME (no API key), and
 * resolves once it has exited and its output is read. `onStart` gets the process as it starts.
 */
export function runCli(args: string[], options: { stdin?: string; env?: Record<string, string>; onStart?: (child: ChildProcess) => void } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env = { PATH: process.env.PATH ?? '', HOME: scratch, ...options.env };
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    options.onStart?.(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.stdin ?? '');
  });
}

/** Writes a file in the test's scratch folder and returns its path. */
export function scratchFile(name: string, content: string): string {
  const path = join(scratch, name);
  writeFileSync(path, content);
  return path;
}

/**
 * A root model for a fake upstream: runs `code` (or the code `code(request)` picks), then answers
 * with FINAL of the first line its block printed.
 */
export function codeThenFinal(code: string | ((request: FakeRequest) => string)): (request: FakeRequest) => FakeReply {
  return (request) => {
    const messages = request.body.messages as { role: string; content?: unknown }[];
    const output = messages.find((message) => message.role === 'user' && String(message.content).startsWith('Code executed'));
    if (!output) return repl(typeof code === 'string' ? code : code(request));
    return `FINAL(${String(output.content).split('REPL output:\n')[1]!.split('\n')[0]})`;
  };
}

/** A port nothing listens on: one the system just handed out and got back. */
export function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
