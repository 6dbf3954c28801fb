import { readdirSync, readFileSync } from 'node:fs';
import type { ChatRequest, LanguageModel } from '../../src/index.js';
import { ScriptedModel, type ReplyFunction, type ScriptedReply } from '../../src/testing.js';

/**
 * A language model for engine tests: the root model ("root", or any model named in `roots`) answers
 * from `root`, every other model (sub-calls) from `sub`.
 */
export function models(root: ScriptedReply[] | ReplyFunction, sub: ScriptedReply[] | ReplyFunction = []) {
  const rootModel = new ScriptedModel(root);
  const subModel = new ScriptedModel(sub);
  const languageModel: LanguageModel = {
    chat: (request: ChatRequest) => (request.model === 'root' || request.model.startsWith('child-') ? rootModel : subModel).chat(request),
  };
  return { rootModel, subModel, languageModel };
}

export const repl = (code: string) => '```repl\n' + code + '\n```';

/** Every text the model was shown, joined: for checking what reached (or never reached) a prompt. */
export function everythingSent(model: ScriptedModel): string {
  return model.calls.map((call) => JSON.stringify(call.messages)).join('\n');
}

export function lastUserMessage(request: { messages: { role: string; content?: unknown }[] }): string {
  const user = [...request.messages].reverse().find((message) => message.role === 'user');
  return typeof user?.content === 'string' ? user.content : '';
}

/** Sandbox worker processes this test process has running now (the pool keeps spares). */
export function workerPids(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        return ppid === process.pid && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('sandbox-worker');
      } catch {
        return false;
      }
    });
}
