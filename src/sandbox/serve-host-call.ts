import type { z } from 'zod';
import { formatCount } from '../format.js';
import { untilAborted } from '../abort.js';
import { describeError } from '../errors.js';
import { clip } from './shared.js';
import { hostCallSchema, parseJsonText, type HostCall, type HostReply } from './protocol.js';

/**
 * Answers a call from model code. The returned value must be JSON-serializable. `signal` aborts
 * when the block that made the call ends; `scope` is what the caller passed to `execute` for that
 * block (undefined for setup code and internal blocks).
 */
export type HostCallHandler<Scope = unknown> = (call: HostCall, context: { signal: AbortSignal; scope: Scope | undefined }) => unknown;

// A batch of a million bad prompts has a million problems; the first few show what is wrong.
const REPORTED_PROBLEMS = 5;
const PROBLEM_CHARS = 200;

/**
 * Answers one call from model code with the JSON text of a HostReply: the request is validated
 * first, and whatever the handler throws becomes a failed reply, never an error of the host.
 */
export async function serveHostCall<Scope>(
  request: string,
  options: { signal: AbortSignal; scope: Scope | undefined; handler: HostCallHandler<Scope> | undefined },
): Promise<string> {
  const value = parseJsonText(request);
  const parsed = hostCallSchema.safeParse(value);
  if (!parsed.success) {
    return replyJson({ ok: false, error: { name: 'TypeError', message: `${readKind(value)}: invalid arguments (${describeProblems(parsed.error.issues)})` } });
  }
  const call = parsed.data;
  const { handler, signal, scope } = options;
  if (!handler) return replyJson({ ok: false, error: { name: 'Error', message: `${callName(call)} is not available in this sandbox` } });
  try {
    return replyJson({ ok: true, value: await untilAborted(Promise.resolve(handler(call, { signal, scope })), signal) });
  } catch (error) {
    return failureReply(error);
  }
}

/** The reply that fails a call with `error`. */
export function failureReply(error: unknown): string {
  return replyJson({ ok: false, error: describeError(error) });
}

function readKind(request: unknown): string {
  const kind = (request as { kind?: unknown } | undefined)?.kind;
  return typeof kind === 'string' ? kind : 'host call';
}

function describeProblems(issues: z.ZodError['issues']): string {
  const problems = issues.slice(0, REPORTED_PROBLEMS).map((issue) => clip(`${issue.path.join('.') || 'arguments'}: ${issue.message}`, PROBLEM_CHARS));
  const unreported = issues.length - problems.length;
  if (unreported > 0) problems.push(`and ${formatCount(unreported)} more problem${unreported === 1 ? '' : 's'}`);
  return problems.join('; ');
}

function callName(call: HostCall): string {
  return call.kind === 'tool_call' ? 'tool_handler' : call.kind;
}

function replyJson(reply: HostReply): string {
  try {
    return JSON.stringify(reply);
  } catch (error) {
    const { message } = describeError(error);
    return JSON.stringify({ ok: false, error: { name: 'TypeError', message: `the host's answer cannot be sent to the sandbox: ${message}` } });
  }
}
