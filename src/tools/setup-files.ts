import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Message, Plugin } from 'esbuild';
import { ConfigurationError } from '../errors.js';
import { packageRoot } from '../paths.js';
import { BlockSyntaxError, checkBlockSyntax, codeFrame } from '../sandbox/rewrite.js';
import { compileTypeScript, loadEsbuild, type SyntaxProblem } from '../typescript.js';
import { toTool, type AnyTool } from './define.js';

/** What setup files contribute to a run. */
interface SetupContribution {
  /** Host tools, callable from model code as tools.NAME(args) and tool_handler(name, args). */
  tools: AnyTool[];
  /** JavaScript run inside the sandbox before the first block. */
  sandboxSetup: string[];
}

/**
 * Loads setup files: TypeScript or JavaScript modules, bundled with esbuild and imported. A file may
 * export `tools` (an array, or an object of tools) and `sandboxSetup` (code as a string, or a
 * function whose body runs in the sandbox), as named exports or on its default export. Imports of
 * `rlm` and `zod` resolve to the copies this rlm uses, wherever the file lives.
 */
export async function loadSetupFiles(paths: string[]): Promise<SetupContribution> {
  const contribution: SetupContribution = { tools: [], sandboxSetup: [] };
  for (const path of paths) {
    const loaded = await loadSetupFile(resolve(path));
    contribution.tools.push(...loaded.tools);
    contribution.sandboxSetup.push(...loaded.sandboxSetup);
  }
  return contribution;
}

async function loadSetupFile(path: string): Promise<SetupContribution> {
  try {
    if (!statSync(path).isFile()) throw new Error('not a file');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new ConfigurationError(`Cannot read setup file ${path}: ${reason}.`);
  }

  const module = await importModuleFile(path, 'Setup file');
  return readExports(module, path);
}

/**
 * Bundles a TypeScript or JavaScript module with esbuild and imports it. Imports of `rlm` and `zod`
 * resolve to the copies this rlm uses, wherever the file lives. `label` starts each error message
 * ("Setup file", "Output schema file").
 */
export async function importModuleFile(path: string, label: string): Promise<Record<string, unknown>> {
  // The bundle is imported from a file, so Node applies its inline source map to stack traces. The
  // map's paths are relative to the bundle: building for its real place makes them lead back to
  // the module file, wherever it lives, also after the temporary folder is gone.
  const folder = mkdtempSync(join(tmpdir(), 'rlm-setup-'));
  const bundle = join(folder, `${basename(path).replace(/\.[^.]+$/, '')}.mjs`);
  let code: string;
  try {
    const output = await loadEsbuild().build({
      entryPoints: [path],
      outfile: bundle,
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      sourcemap: 'inline',
      logLevel: 'silent',
      // Other dependencies of the module are bundled from where it lives.
      plugins: [sharedPackages()],
    });
    code = output.outputFiles[0]!.text;
  } catch (error) {
    rmSync(folder, { recursive: true, force: true });
    const errors = (error as { errors?: Message[] }).errors ?? [];
    const first = errors[0];
    const where = first?.location ? `${resolve(first.location.file)}:${first.location.line}:${first.location.column + 1}` : path;
    throw new ConfigurationError(`${label} ${where}: ${first?.text ?? (error as Error).message}`);
  }

  writeFileSync(bundle, code);
  let module: Record<string, unknown>;
  try {
    process.setSourceMapsEnabled(true);
    module = (await import(pathToFileURL(bundle).href)) as Record<string, unknown>;
  } catch (error) {
    const location = /\((\/[^)]+:\d+:\d+)\)|at (\/[^\s]+:\d+:\d+)/.exec((error as Error).stack ?? '');
    const at = location ? ` (at ${location[1] ?? location[2]})` : '';
    throw new ConfigurationError(`${label} ${path} failed while loading: ${(error as Error).message}${at}`);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  return module;
}

function readExports(module: Record<string, unknown>, path: string): SetupContribution {
  const fallback = (module.default ?? {}) as Record<string, unknown>;
  const tools = module.tools ?? fallback.tools;
  const sandboxSetup = module.sandboxSetup ?? fallback.sandboxSetup;
  if (tools === undefined && sandboxSetup === undefined) {
    throw new ConfigurationError(`Setup file ${path} exports neither "tools" nor "sandboxSetup"; export at least one of them.`);
  }
  const toolList = tools === undefined ? [] : Array.isArray(tools) ? tools : typeof tools === 'object' && tools !== null ? Object.values(tools) : undefined;
  if (!toolList) throw new ConfigurationError(`Setup file ${path}: "tools" must be an array or an object of tools.`);
  return {
    tools: toolList.map((tool, index) => toTool(tool, `Setup file ${path}, tool #${index + 1}`)),
    sandboxSetup: (Array.isArray(sandboxSetup) ? sandboxSetup : sandboxSetup === undefined ? [] : [sandboxSetup]).map((entry) =>
      sandboxJavaScript(sandboxCode(entry, path), { label: `Setup file ${path}, sandboxSetup`, language: undefined }),
    ),
  };
}

function sandboxCode(entry: unknown, path: string): string {
  if (typeof entry === 'string') return entry;
  if (typeof entry === 'function') {
    // The function's body runs at the top level of the sandbox, so what it declares persists.
    const source = Function.prototype.toString.call(entry);
    const body = /^[^{]*\{([\s\S]*)\}\s*$/.exec(source);
    if (body) return body[1]!;
  }
  throw new ConfigurationError(`Setup file ${path}: "sandboxSetup" must be code as a string, or a function.`);
}

/** Points `rlm` and `zod` imports at the copies the running rlm uses. */
function sharedPackages(): Plugin {
  return {
    name: 'rlm-shared-packages',
    setup(pluginBuild) {
      pluginBuild.onResolve({ filter: /^(rlm|zod)(\/.*)?$/ }, (args) => {
        if (args.path === 'rlm' || args.path === 'rlm/testing') {
          const file = args.path === 'rlm' ? 'index.js' : 'testing.js';
          return { path: pathToFileURL(join(packageRoot(), 'dist', file)).href, external: true };
        }
        return { path: import.meta.resolve(args.path), external: true };
      });
    },
  };
}

/** Setup code run in the sandbox before the first block: JavaScript, TypeScript, or a file of either. */
export type SetupCode = string | { code: string; language?: 'js' | 'ts' | undefined } | { file: string };

/**
 * Reads setup code files and strips TypeScript types, so the sandbox gets plain JavaScript. Each
 * entry is checked here, when the RLM is built: setup code first runs in the sandbox after the
 * root model's first reply, too late (and too costly) to find a typo.
 */
export function loadSetupCode(entries: SetupCode[]): string[] {
  return entries.map((entry, index) => {
    const label = entries.length === 1 ? 'setupCode' : `setupCode[${index}]`;
    if (typeof entry === 'string') return sandboxJavaScript(entry, { label, language: undefined });
    if ('file' in entry) {
      let code: string;
      try {
        code = readFileSync(entry.file, 'utf8');
      } catch (error) {
        throw new ConfigurationError(`Cannot read setup code file ${entry.file}: ${(error as Error).message}`);
      }
      return sandboxJavaScript(code, { label: `Setup code file ${entry.file}`, language: /\.[cm]?ts$/.test(entry.file) ? 'ts' : undefined });
    }
    return sandboxJavaScript(entry.code, { label, language: entry.language });
  });
}

/**
 * Setup code as the sandbox runs it. TypeScript is stripped of its types; code of no stated
 * language is taken as JavaScript when it parses as JavaScript, else as TypeScript when it
 * compiles as TypeScript. Code that is neither fails with the reason of the language it got
 * further in, and where.
 */
function sandboxJavaScript(code: string, { label, language }: { label: string; language: 'js' | 'ts' | undefined }): string {
  if (language === 'ts') {
    const compiled = compileTypeScript(code);
    if ('problem' in compiled) throw new ConfigurationError(`${label} is not valid TypeScript: ${describeProblem(code, compiled.problem)}`);
    return checkedJavaScript(compiled.code, label);
  }
  const asJavaScript = javaScriptProblem(code);
  if (!asJavaScript) return code;
  if (language === 'js') throw new ConfigurationError(`${label} is not valid JavaScript: ${describeProblem(code, asJavaScript)}`);
  const compiled = compileTypeScript(code);
  if (!('problem' in compiled)) return checkedJavaScript(compiled.code, label);
  const { problem: asTypeScript } = compiled;
  const further = asTypeScript.line > asJavaScript.line || (asTypeScript.line === asJavaScript.line && asTypeScript.column > asJavaScript.column) ? asTypeScript : asJavaScript;
  throw new ConfigurationError(`${label} is not valid JavaScript or TypeScript: ${describeProblem(code, further)}`);
}

function checkedJavaScript(code: string, label: string): string {
  const problem = javaScriptProblem(code);
  if (problem) throw new ConfigurationError(`${label} does not compile to code the sandbox can run: ${describeProblem(code, problem)}`);
  return code;
}

/** Why `code` does not parse as a sandbox block, or undefined. */
function javaScriptProblem(code: string): SyntaxProblem | undefined {
  try {
    checkBlockSyntax(code);
    return undefined;
  } catch (error) {
    if (!(error instanceof BlockSyntaxError)) throw error;
    return { message: error.message.replace(/ \(\d+:\d+\)$/, ''), line: error.line, column: error.column };
  }
}

function describeProblem(code: string, { message, line, column }: SyntaxProblem): string {
  return `${message} at line ${line}, column ${column + 1}:\n${codeFrame(code, line, column)}`;
}
