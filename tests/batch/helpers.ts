import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { needleTask, type FakeRequest } from '../../src/testing.js';

/** Sentences per needle context: enough for two chunks, few enough that 200 tasks run quickly. */
export const SENTENCES = 30;

/** The question a fake-server request is about: the last user message of a root request, or the one quoted in a sub-call. */
export function questionOf(request: FakeRequest): string | undefined {
  const text = JSON.stringify(request.body.messages ?? []);
  return /What is the secret code of item \d+\?/.exec(text)?.[0];
}

/**
 * Writes a tasks file of `count` needle tasks in four shapes, in turn: an inline context, a
 * context file, a folder of files (the needle in one of them), and an OpenAI Batch API line whose
 * system message is the context. Returns its path and the right answer of each id.
 */
export function mixedTasksFile(folder: string, count: number): { path: string; answers: Map<string, string> } {
  const answers = new Map<string, string>();
  const lines: string[] = [];
  mkdirSync(join(folder, 'data'), { recursive: true });
  for (let index = 0; index < count; index++) {
    const task = needleTask(index, SENTENCES);
    const id = `t${index}`;
    answers.set(id, task.answer);
    const shape = index % 4;
    if (shape === 0) {
      lines.push(JSON.stringify({ id, query: task.question, context: task.context, expected: task.answer }));
    } else if (shape === 1) {
      writeFileSync(join(folder, 'data', `${id}.txt`), task.context);
      lines.push(JSON.stringify({ id, query: task.question, context_path: `data/${id}.txt`, expected: task.answer }));
    } else if (shape === 2) {
      const dir = join(folder, 'data', id);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'a.txt'), 'Nothing of note happened on Tuesday.');
      writeFileSync(join(dir, 'b.txt'), task.context);
      lines.push(JSON.stringify({ id, query: task.question, context_path: `data/${id}`, expected: task.answer }));
    } else {
      const body = { model: 'fake-rlm', messages: [{ role: 'system', content: task.context }, { role: 'user', content: task.question }] };
      lines.push(JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body, expected: task.answer }));
    }
  }
  const path = join(folder, 'tasks.jsonl');
  writeFileSync(path, `${lines.join('\n')}\n`);
  return { path, answers };
}

/** The parsed lines of a results file. */
export function resultLines(path: string): Record<string, unknown>[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The id of a results line, in either shape. */
export function idOf(line: Record<string, unknown>): string {
  return String(line.custom_id ?? line.id);
}
