import { DEFAULTS } from '../defaults.js';
import { ConfigurationError } from '../errors.js';
import { driveToolLoop, handlerRunner, toolLoop, type ToolHandler } from './tool-loop.js';
import type { ChatRequest, LanguageModel } from './types.js';

export interface RunToolLoopOptions {
  /** Where model calls go: a LanguageModel, or a ModelGateway (scheduling, usage, events). */
  model: Pick<LanguageModel, 'chat'>;
  request: ChatRequest;
  /** Runs each tool call; a thrown error becomes the result "Error executing NAME: message". */
  handler?: ToolHandler;
  /** Model calls before giving up with ToolLoopError. @default 10 */
  maxIterations?: number;
}

/**
 * Calls the model, runs the tool calls it asks for (one at a time, in order), sends the results
 * back, and repeats until the model answers with text.
 *
 * @example
 * const answer = await runToolLoop({
 *   model: new OpenAIModel(),
 *   request: { model: 'gpt-5-mini', messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: [weatherTool] },
 *   handler: async (name, args) => getWeather(args.city as string),
 * });
 */
export function runToolLoop(options: RunToolLoopOptions): Promise<string> {
  const { model, request, handler } = options;
  if (request.tools?.length && !handler) {
    throw new ConfigurationError('runToolLoop: a handler is required when tools are provided');
  }
  const runTools = handler ? handlerRunner(handler) : () => Promise.reject(new Error('no tool handler'));
  const loop = toolLoop(request, options.maxIterations ?? DEFAULTS.lm.maxToolIterations);
  return driveToolLoop(loop, (next) => model.chat(next), runTools);
}
