import { transformSync } from 'esbuild';

/**
 * Strips TypeScript types (esbuild), for ```ts blocks and TypeScript setup code. Throws an Error
 * whose message is esbuild's diagnostic without its "Transform failed" preamble.
 */
export function transpileTypeScript(code: string): string {
  try {
    return transformSync(code, { loader: 'ts' }).code;
  } catch (error) {
    throw new Error((error as Error).message.replace(/^Transform failed with \d+ errors?:\n/, ''));
  }
}
