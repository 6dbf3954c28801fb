import { createRequire } from 'node:module';

type Esbuild = typeof import('esbuild');
let esbuild: Esbuild | undefined;

/** esbuild, loaded the first time TypeScript is met: most runs have none, and loading it costs tens of ms. */
export function loadEsbuild(): Esbuild {
  esbuild ??= createRequire(import.meta.url)('esbuild') as Esbuild;
  return esbuild;
}

/**
 * Strips TypeScript types (esbuild), for ```ts blocks and TypeScript setup code. Throws an Error
 * whose message is esbuild's diagnostic without its "Transform failed" preamble.
 */
export function transpileTypeScript(code: string): string {
  try {
    return loadEsbuild().transformSync(code, { loader: 'ts' }).code;
  } catch (error) {
    throw new Error((error as Error).message.replace(/^Transform failed with \d+ errors?:\n/, ''));
  }
}
