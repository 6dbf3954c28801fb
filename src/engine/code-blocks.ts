import type { ExecuteResult, Sandbox } from '../sandbox/sandbox.js';
import { transpileTypeScript } from '../typescript.js';
import type { BlockServices } from './block-services.js';
import type { CodeBlockRecord } from './events.js';
import type { BlockScope } from './host-calls.js';
import type { CodeBlock } from './parsing.js';
import type { RunEventInput } from './run-types.js';

interface CodeBlocksOptions {
  services: BlockServices;
  emit: (event: RunEventInput) => void;
}

interface ReplyBlocks {
  /** Awaited only when there are blocks to run. */
  sandbox: Promise<Sandbox<BlockScope>>;
  blocks: CodeBlock[];
  iteration: number;
  signal: AbortSignal;
}

/** Runs the code blocks of a run's replies in its sandbox, each with its own scope. */
export class CodeBlockRunner {
  readonly #options: CodeBlocksOptions;
  #codeHasRun = false;

  constructor(options: CodeBlocksOptions) {
    this.#options = options;
  }

  /** Whether any block has reached the sandbox in this run (one that did not compile has not). */
  get codeHasRun(): boolean {
    return this.#codeHasRun;
  }

  /** Runs the reply's blocks in order, stopping after one that gives a final answer. */
  async run({ sandbox, blocks, iteration, signal }: ReplyBlocks): Promise<CodeBlockRecord[]> {
    const records: CodeBlockRecord[] = [];
    for (const [index, block] of blocks.entries()) {
      const record = await this.#runBlock(await sandbox, block, { iteration, index, signal });
      records.push(record);
      if (record.result.final !== undefined) break;
    }
    return records;
  }

  async #runBlock(sandbox: Sandbox<BlockScope>, block: CodeBlock, at: { iteration: number; index: number; signal: AbortSignal }): Promise<CodeBlockRecord> {
    const { services, emit } = this.#options;
    emit({ type: 'code-start', iteration: at.iteration, block: at.index, code: block.code, language: block.language });
    const scope = services.newScope();
    let result: ExecuteResult;
    const compiled = block.language === 'ts' ? transpile(block.code) : { code: block.code };
    if ('error' in compiled) {
      result = { stdout: '', error: compiled.error, durationMs: 0, variables: [], reset: false };
    } else {
      result = await sandbox.execute(compiled.code, { signal: at.signal, scope, checkFinal: services.checksFinal });
      this.#codeHasRun = true;
    }
    emit({ type: 'code-end', iteration: at.iteration, block: at.index, result });
    const rejected = result.rejectedFinals && { rejectedFinals: result.rejectedFinals };
    return { code: block.code, language: block.language, result, subcalls: scope.subcalls, toolCalls: scope.toolCalls, ...rejected };
  }
}

function transpile(code: string): { code: string } | { error: { name: string; message: string; stack: string } } {
  try {
    return { code: transpileTypeScript(code) };
  } catch (error) {
    const { message: text } = error as Error;
    return { error: { name: 'SyntaxError', message: text, stack: `SyntaxError: ${text}` } };
  }
}
