import { createRequire } from 'node:module';
import type { Message } from 'esbuild';

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

/** Where code does not parse, and why. */
export interface SyntaxProblem {
  message: string;
  line: number;
  /** 0-based. */
  column: number;
}

/** `code` with its TypeScript types stripped, or why and where it does not compile as TypeScript. */
export function compileTypeScript(code: string): { code: string } | { problem: SyntaxProblem } {
  try {
    return { code: loadEsbuild().transformSync(code, { loader: 'ts' }).code };
  } catch (error) {
    const first = (error as { errors?: Message[] }).errors?.[0];
    return { problem: { message: first?.text ?? (error as Error).message, line: first?.location?.line ?? 1, column: first?.location?.column ?? 0 } };
  }
}
