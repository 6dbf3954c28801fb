// `rlm mcp`: rlm as a tool for assistants. An MCP server over stdio (the official SDK) with one
// tool, rlm_completion, that answers a question about a context too large for the assistant's own
// window. stdout carries the protocol, so everything else goes to stderr.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { checkOutputSchema, RLM, RlmError, RunFailedError, type RLMOptions } from '../index.js';
import { describeError } from '../errors.js';
import { loadContexts } from '../inputs/contexts.js';
import type { CommandIo } from './io.js';
import { buildOptions } from './run-command.js';
import type { RunOptionFlags } from './run-options.js';
import { stopRequested } from './stop-signals.js';
import { EXIT, isConfigurationProblem } from './usage-error.js';

/** The flags of `rlm mcp`, as commander parses them. */
export interface McpFlags extends RunOptionFlags {
  model?: string;
  subModel?: string;
}

const completionInput = {
  query: z.string().min(1).describe('The question to answer about the context.'),
  context: z.string().optional().describe('The input itself, as text. Use context_paths for files.'),
  context_paths: z.array(z.string().min(1)).optional().describe('Files or folders to read as the input (as rlm run --context reads them).'),
  model: z.string().optional().describe('Root model that writes the code (default: the server’s).'),
  sub_model: z.string().optional().describe('Model for llm_query from code (default: the server’s).'),
  output_schema: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('A JSON Schema for the answer: the answer is then a JSON value matching it, returned as structured content (output) and as JSON text.'),
};

const modelUsage = z.object({ calls: z.number(), inputTokens: z.number(), outputTokens: z.number(), costUsd: z.number().nullable() });
const completionOutput = {
  iterations: z.number(),
  forced: z.boolean(),
  durationMs: z.number(),
  /** The library's `result.usage` (and `usage` in rlm run --json). */
  usage: modelUsage.omit({ costUsd: true }).extend({ byModel: z.record(z.string(), modelUsage), costUsd: z.number().nullable(), costComplete: z.boolean() }),
  logPath: z.string().optional(),
  /** With output_schema: the answer's value. */
  output: z.unknown().optional(),
};

export async function mcpCommand(flags: McpFlags, io: CommandIo, version: string): Promise<number> {
  const prepared = await prepareRuns(flags, io);
  const server = new McpServer({ name: 'rlm', version });
  server.registerTool(
    'rlm_completion',
    {
      title: 'Recursive Language Model',
      description:
        'Answers a question about an input far larger than your context window (files, folders, long text). ' +
        'A model explores the input by writing code in a sandbox and calling sub-models on parts of it; you get the answer.',
      inputSchema: completionInput,
      outputSchema: completionOutput,
    },
    (args, extra) => (('problem' in prepared) ? toolError(prepared.problem) : answerCall({ args, extra, prepared, io })),
  );
  const transport = new StdioServerTransport(process.stdin, process.stdout);
  await server.connect(transport);
  io.stderr.write(
    'problem' in prepared
      ? 'rlm: MCP server on stdio, tool rlm_completion: every call will fail with the problem above until it is fixed\n'
      : `rlm: MCP server on stdio, tool rlm_completion (model ${prepared.options.model}${prepared.options.baseURL ? ` at ${prepared.options.baseURL}` : ''})\n`,
  );
  // Until the client closes its end (or a stop signal).
  const clientGone = new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
  });
  await Promise.race([clientGone, stopRequested(io.interrupt)]);
  await server.close();
  return EXIT.ok;
}

type CompletionArgs = z.infer<z.ZodObject<typeof completionInput>>;
type CallExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** One rlm_completion call: a run, with its iterations as MCP progress, its result as structured content. */
async function answerCall({ args, extra, prepared, io }: { args: CompletionArgs; extra: CallExtra; prepared: { options: RLMOptions; base: RLM }; io: CommandIo }) {
  const { options, base } = prepared;
  const schemaProblem = args.output_schema && problemOfSchema(args.output_schema);
  if (schemaProblem) return toolError(`output_schema cannot be used: ${schemaProblem}`);
  const context = await contextOf(args.context, args.context_paths, io);
  const rlm = args.model || args.sub_model ? new RLM(runOptions(options, args.model, args.sub_model)) : base;
  const progressToken = extra._meta?.progressToken;
  try {
    for await (const event of rlm.stream({ context, query: args.query, signal: extra.signal, ...(args.output_schema && { output: args.output_schema }) })) {
      if (event.type === 'iteration-start' && event.depth === 0 && progressToken !== undefined) {
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken, progress: event.iteration, total: event.maxIterations, message: `iteration ${event.iteration} of ${event.maxIterations}` },
        });
      }
      if (event.type === 'run-end') {
        const { result } = event;
        return {
          content: [{ type: 'text' as const, text: result.response }],
          structuredContent: {
            iterations: result.iterations,
            forced: result.forced,
            durationMs: Math.round(result.durationMs),
            usage: result.usage,
            ...(result.logPath && { logPath: result.logPath }),
            ...(args.output_schema && { output: result.output }),
          },
        };
      }
    }
    throw new Error('the run ended without a result');
  } catch (error) {
    const partial = error instanceof RunFailedError ? error.partialAnswer : undefined;
    const { message } = describeError(error);
    return toolError(`The run stopped: ${message}${partial ? `\nPartial answer (the best the run had so far):\n${partial}` : ''}`);
  }
}

/**
 * The options and the RLM of every call, built now: a broken setup file shows at once, and MCP
 * servers start. A configuration problem (most often: no API key) does not stop the server, since
 * a client shows nothing of a server that exits but "Connection closed": every call answers with
 * the problem and its fix instead.
 */
async function prepareRuns(flags: McpFlags, io: CommandIo): Promise<{ options: RLMOptions; base: RLM } | { problem: string }> {
  try {
    const options = await buildOptions(flags, io);
    const base = new RLM(options);
    for (const warning of (await base.prepare()).warnings ?? []) io.stderr.write(`rlm: ${warning}\n`);
    return { options, base };
  } catch (error) {
    if (!isConfigurationProblem(error)) throw error;
    io.stderr.write(`rlm: ${error.message}\n`);
    const fix = error.code === 'missing_api_key' ? ' In the MCP client\'s entry for rlm, set OPENAI_API_KEY under "env", or add "--base-url" and the URL of an OpenAI-compatible server to "args".' : '';
    return { problem: `rlm is not configured to run: ${error.message}${fix}` };
  }
}

/** Why a JSON Schema cannot be an output schema, or undefined: checked before the run starts. */
function problemOfSchema(schema: Record<string, unknown>): string | undefined {
  try {
    checkOutputSchema(schema);
    return undefined;
  } catch (error) {
    if (error instanceof RlmError) return error.message;
    throw error;
  }
}

function toolError(text: string) {
  return { isError: true, content: [{ type: 'text' as const, text }] };
}

function runOptions(options: RLMOptions, model: string | undefined, subModel: string | undefined): RLMOptions {
  return { ...options, ...(model && { model }), ...(subModel && { subModel }) };
}

async function contextOf(text: string | undefined, paths: string[] | undefined, io: CommandIo): Promise<unknown> {
  if (!paths || paths.length === 0) return text ?? '';
  const notice = (message: string) => io.stderr.write(`rlm: ${message}\n`);
  // Standard input carries the MCP protocol: it is not the user's to pass.
  const loaded = await loadContexts({ sources: paths, notice });
  return text === undefined ? loaded : [text, loaded];
}
