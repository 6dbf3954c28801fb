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


/** Every text the model was shown, joined: for checking what reached (or never reached) a prompt. */
export function everythingSent(model: ScriptedModel): string {
  return model.calls.map((call) => JSON.stringify(call.messages)).join('\n');
}

export function lastUserMessage(request: { messages: { role: string; content?: unknown }[] }): string {
  const user = [...request.messages].reverse().find((message) => message.role === 'user');
  return typeof user?.content === 'string' ? user.content : '';
}
