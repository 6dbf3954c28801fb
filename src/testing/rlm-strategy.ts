import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { message } from '../engine/prompts.js';
import { packageRoot } from '../paths.js';
import type { FakeReply, FakeRequest } from './fake-openai-server.js';

/** What a sub-model answers when its part of the context does not answer the question. */
export const NOT_FOUND = 'NOT FOUND';

interface WireMessage {
  role?: string;
  content?: unknown;
}

/**
 * A reply function for `startFakeOpenAIServer` that plays both models of an RLM run, so a whole
 * run can be watched (and tested) offline, with no model and no key.
 *
 * As the ROOT model (recognised by rlm's system prompt, prompts/system.md) it follows a real RLM
 * strategy over three turns: it looks at `context` (type, length, a preview), then splits it into
 * chunks on sentence boundaries and asks every chunk the question with `llm_query_batched` (a
 * chunk whose call failed is asked once more), then combines the answers and calls FINAL. As the
 * SUB model it reads the chunk it is given and quotes the sentence that best matches the question's
 * words (every number in the question must be in it), or answers NOT FOUND. Needle questions
 * ("What is the secret code of item 4411?" over a text that hides "The secret code of item 4411 is
 * XYZ-123.") get right answers.
 *
 * @example
 * const upstream = await startFakeOpenAIServer({ reply: rlmStrategyReply });
 * const rlm = new RLM({ model: 'fake-rlm', baseURL: upstream.baseURL });
 */
export function rlmStrategyReply(request: FakeRequest): FakeReply {
  const messages = (Array.isArray(request.body.messages) ? request.body.messages : []) as WireMessage[];
  return isRootRequest(messages) ? rootTurn(messages) : subAnswer(textOf(messages.at(-1)?.content));
}

let systemPromptOpening: string | undefined;

/** The root's first message is rlm's system prompt; sub-calls are the prompts model code wrote. */
function isRootRequest(messages: WireMessage[]): boolean {
  systemPromptOpening ??= readFileSync(join(packageRoot(), 'prompts', 'system.md'), 'utf8').split('{{')[0]!.slice(0, 120);
  const first = messages[0];
  return first?.role === 'system' && textOf(first.content).startsWith(systemPromptOpening);
}

function rootTurn(messages: WireMessage[]): FakeReply {
  const turn = messages.filter((entry) => entry.role === 'assistant').length;
  if (turn === 0) return repl(LOOK);
  if (turn === 1) return repl(askEveryChunk(queryOf(messages)));
  return repl(COMBINE);
}

const repl = (code: string) => '```repl\n' + code + '\n```';

const LOOK = `const text = typeof context === 'string' ? context
  : Array.isArray(context) ? context.map((item) => (typeof item === 'string' ? item : JSON.stringify(item))).join('\\n')
  : JSON.stringify(context);
print(Array.isArray(context) ? 'an array of ' + context.length + ' items' : typeof context, '|', text.length, 'characters');
print(text.slice(0, 300));`;

/** Chunks of whole sentences, about an eighth of the text each, asked the question at once. */
function askEveryChunk(query: string): string {
  return `const question = ${JSON.stringify(query)};
const chunkSize = Math.max(1000, Math.ceil(text.length / 8));
const chunks = [];
let chunk = '';
for (const sentence of text.split(/(?<=[.!?])\\s+|\\n+/)) {
  if (chunk && chunk.length + sentence.length > chunkSize) { chunks.push(chunk); chunk = ''; }
  chunk += sentence + '\\n';
}
if (chunk) chunks.push(chunk);
const prompts = chunks.map((part, i) =>
  \`Question: \${question}\\nPart \${i + 1} of \${chunks.length} of the context follows. Quote the sentence that answers the question, or reply ${NOT_FOUND}.\\n\\n\${part}\`);
const answers = llm_query_batched(prompts);
// A part whose call failed (after rlm's own retries) is asked once more.
const again = answers.flatMap((answer, i) => (answer.startsWith('Error:') ? [i] : []));
if (again.length > 0) llm_query_batched(again.map((i) => prompts[i])).forEach((answer, k) => (answers[again[k]] = answer));
const found = answers.filter((answer) => !answer.startsWith('Error:') && !answer.includes('${NOT_FOUND}'));
const failed = answers.filter((answer) => answer.startsWith('Error:')).length;
print(chunks.length, 'chunks:', found.length, 'with an answer,', failed, 'failed');
print(found.join('\\n'));`;
}

const COMBINE = `FINAL(found.length > 0 ? [...new Set(found)].join('\\n')
  : failed > 0 ? 'Not found: ' + failed + ' of ' + chunks.length + ' parts could not be read.' : 'Not found in the context.');`;

/** The query, from the turn prompt that quotes it (prompts/messages.md, "query"). */
function queryOf(messages: WireMessage[]): string {
  const [before, after] = message('query', { query: '\u0000' }).split('\u0000') as [string, string];
  for (const entry of messages.filter((item) => item.role === 'user').reverse()) {
    const text = textOf(entry.content);
    const start = text.indexOf(before);
    const end = text.lastIndexOf(after);
    if (start >= 0 && end >= start + before.length) return text.slice(start + before.length, end);
  }
  return '';
}

const STOP_WORDS = new Set(
  'what which where when who whom whose why how does did do the and for are was were is of an in on to this that these those with from about into there their its it be has have had can could would should tell me context document text part question answer please'.split(' '),
);

/** The sentence of the prompt's text that best matches its question, or NOT FOUND. */
function subAnswer(prompt: string): string {
  const questionLine = /^Question: (.*)$/m.exec(prompt)?.[1] ?? prompt.split('\n')[0] ?? '';
  const body = prompt.includes('\n\n') ? prompt.slice(prompt.indexOf('\n\n') + 2) : prompt;
  const words = (questionLine.toLowerCase().match(/[\p{L}\p{N}][\p{L}\p{N}_-]*/gu) ?? []).filter(
    (word) => !STOP_WORDS.has(word) && (word.length >= 3 || /\d/.test(word)),
  );
  const numbers = words.filter((word) => /\d/.test(word));
  const needed = Math.max(1, Math.ceil(words.length * 0.6));
  let best: { sentence: string; score: number } | undefined;
  const question = questionLine.trim().toLowerCase();
  for (const sentence of body.split(/(?<=[.!?])\s+|\n+/)) {
    const lower = sentence.toLowerCase();
    // A sentence that repeats the question (a quoted example of it, say) does not answer it.
    if (question && lower.includes(question)) continue;
    if (!numbers.every((number) => new RegExp(`(^|[^\\p{N}])${escapeRegExp(number)}($|[^\\p{N}])`, 'u').test(lower))) continue;
    const score = words.filter((word) => new RegExp(`(^|[^\\p{L}\\p{N}])${escapeRegExp(word)}`, 'u').test(lower)).length;
    if (score >= needed && score > (best?.score ?? 0)) best = { sentence: sentence.trim(), score };
  }
  return best?.sentence ?? NOT_FOUND;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('');
  return '';
}
