// Builds dist/: the library and CLI bundles, and the sandbox worker with the in-isolate prelude
// (sandbox/prelude.ts) compiled to a string constant inside it.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { build } from 'esbuild';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });

const prelude = await build({
  entryPoints: [join(root, 'sandbox/prelude.ts')],
  bundle: true,
  write: false,
  format: 'iife',
  globalName: 'rlmPrelude',
  platform: 'neutral',
  target: 'es2022',
  legalComments: 'none',
});

const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  sourcemap: true,
  logLevel: 'warning',
};

await build({
  ...common,
  entryPoints: { 'sandbox-worker': join(root, 'src/sandbox/worker.ts') },
  outdir: dist,
  define: { __RLM_PRELUDE_SOURCE__: JSON.stringify(prelude.outputFiles[0].text) },
});

// The library: its dependencies stay packages, shared with the application that imports it.
await build({
  ...common,
  entryPoints: {
    index: join(root, 'src/index.ts'),
    testing: join(root, 'src/testing.ts'),
    queue: join(root, 'src/queue.ts'),
  },
  outdir: dist,
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
});

// The CLI: one self-contained bundle (split only where commands load lazily), so starting it
// resolves and reads a handful of files instead of hundreds in node_modules. esbuild (a native
// binary) and isolated-vm (used by the worker only) stay packages.
await build({
  ...common,
  packages: undefined,
  external: ['esbuild', 'isolated-vm'],
  entryPoints: { cli: join(root, 'src/cli/bin.ts') },
  outdir: dist,
  define: { __RLM_VERSION__: JSON.stringify(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version) },
  splitting: true,
  chunkNames: 'cli-chunks/[name]-[hash]',
  // Bundled CommonJS packages may call require() for Node built-ins.
  banner: { js: "import { createRequire as __rlmCreateRequire } from 'node:module'; const require = __rlmCreateRequire(import.meta.url);" },
});

// Type declarations for library users (the bundles above carry no types).
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
