// Starts a real redis-server (Debian's) for a test file: on a free loopback port, with its data in a
// temp folder, stopped when the file's tests are done. Nothing is shared with a Redis the machine
// may already run.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { afterAll } from 'vitest';
import { tempFolder } from './temp-folder.js';

export interface TestRedis {
  /** redis://127.0.0.1:PORT */
  url: string;
  port: number;
  /** The server process (kill it to test what happens when Redis goes away). */
  process: ChildProcess;
  stop(): Promise<void>;
}

const started: TestRedis[] = [];

afterAll(async () => {
  await Promise.all(started.splice(0).map((redis) => redis.stop()));
});

/** A port nobody listens on right now (the kernel's choice). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}

/**
 * Starts redis-server and resolves once it accepts connections. `appendonly` turns on AOF
 * persistence (for tests that restart Redis and expect the queue to survive).
 */
export async function startRedis({ appendonly = false }: { appendonly?: boolean } = {}): Promise<TestRedis> {
  const port = await freePort();
  const dir = tempFolder('rlm-redis-');
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', appendonly ? 'yes' : 'no', '--loglevel', 'warning'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitForPort(port, child, () => output);
  const redis: TestRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    process: child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  started.push(redis);
  return redis;
}

async function waitForPort(port: number, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}: ${output()}`);
    if (await answersPing(port)) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not answer on port ${port} within 10 s: ${output()}`);
}

/** Sends an inline PING and waits for +PONG. */
async function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.setTimeout(500);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}
