import { DEFAULTS } from '../defaults.js';
import { describeError, ToolLoopError } from '../errors.js';
import { parseToolArguments, unknownToolMessage } from './tool-arguments.js';
import { toolErrorText, toolOutputText } from './tool-text.js';
import { toolCallMessage, type ChatMessage, type ChatRequest, type ChatResponse, type ToolCall } from './types.js';

/**
 * The tool-calling loop as a generator, so one implementation serves every way of running tools:
 * the loop yields what it needs (a model reply, or the outputs of some tool calls) and whoever
 * drives it decides how to get that. The host runs async handlers directly; the sandbox hands tool
 * calls back to model code, because a handler written in sandbox JavaScript can only be called
 * from inside the sandbox.
 */
type ToolLoopStep = { type: 'model'; request: ChatRequest } | { type: 'tools'; calls: ToolInvocation[] };

/** A tool call with its arguments parsed, ready for a handler. */
export interface ToolInvocation {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export function* toolLoop(
  request: ChatRequest,
  maxIterations: number = DEFAULTS.lm.maxToolIterations,
): Generator<ToolLoopStep, string, ChatResponse | string[]> {
  const messages: ChatMessage[] = [...request.messages];
  const toolNames = new Set((request.tools ?? []).map((tool) => tool.function.name));
  for (let iteration = 1; ; iteration++) {
    const response = (yield { type: 'model', request: { ...request, messages: [...messages] } }) as ChatResponse;
    if (response.toolCalls.length === 0) return response.content ?? '';
    if (iteration >= maxIterations) throw new ToolLoopError(`Maximum tool iterations (${maxIterations}) exceeded`);

    messages.push({ role: 'assistant', content: response.content, tool_calls: response.toolCalls.map(toolCallMessage) });
    const outputs: string[] = [];
    const runnable: { index: number; invocation: ToolInvocation }[] = [];
    response.toolCalls.forEach((call, index) => {
      const problem = checkCall(call, toolNames);
      if (typeof problem === 'string') outputs[index] = problem;
      else runnable.push({ index, invocation: problem });
    });
    if (runnable.length > 0) {
      const results = (yield { type: 'tools', calls: runnable.map((entry) => entry.invocation) }) as string[];
      runnable.forEach((entry, position) => {
        outputs[entry.index] = results[position] ?? '';
      });
    }
    response.toolCalls.forEach((call, index) => {
      messages.push({ role: 'tool', tool_call_id: call.id, content: outputs[index]! });
    });
  }
}

/** Unknown tools and malformed arguments become results the model can read and correct. */
function checkCall(call: ToolCall, toolNames: Set<string>): ToolInvocation | string {
  if (!toolNames.has(call.name)) return `Error: ${unknownToolMessage(call.name, toolNames)}`;
  const parsed = parseToolArguments(call.name, call.arguments);
  if (!parsed.ok) return `Error: ${parsed.message}`;
  return { id: call.id, name: call.name, arguments: parsed.value };
}

/** How a driver gets outputs for tool calls: one string per call, in order. */
type ToolRunner = (calls: ToolInvocation[]) => Promise<string[]>;

/** Runs the loop to its answer: model calls through `callModel`, tool calls through `runTools`. */
export async function driveToolLoop(
  loop: Generator<ToolLoopStep, string, ChatResponse | string[]>,
  callModel: (request: ChatRequest) => Promise<ChatResponse>,
  runTools: ToolRunner,
): Promise<string> {
  let step = loop.next();
  while (!step.done) {
    const input = step.value.type === 'model' ? await callModel(step.value.request) : await runTools(step.value.calls);
    step = loop.next(input);
  }
  return step.value;
}

/** A host-side tool handler: returns the result text (objects are sent as JSON). */
export type ToolHandler = (name: string, args: Record<string, unknown>) => unknown;

/** The host driver's tool runner: calls run one at a time, in order; failures become results. */
export function handlerRunner(handler: ToolHandler): ToolRunner {
  return async (calls) => {
    const outputs: string[] = [];
    for (const call of calls) {
      try {
        outputs.push(toolOutputText(await handler(call.name, call.arguments), JSON.stringify));
      } catch (error) {
        outputs.push(toolErrorText(call.name, describeError(error).message));
      }
    }
    return outputs;
  };
}
