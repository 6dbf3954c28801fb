// A setup file for `rlm run --setup examples/stats-tools.ts`: survey statistics that were computed
// ahead of time, offered to the model as a host tool. Model code can call it directly
// (`tools.get_stats({ question_id: 'q1' })`) or let a sub-model call it
// (`llm_query(prompt, { tools: TOOLS, tool_handler })`).
import { defineTool } from 'rlm';
import { z } from 'zod';

const STATS: Record<string, { responses: number; average: number; distribution: Record<string, number> }> = {
  q1: { responses: 500, average: 4.2, distribution: { '1': 10, '2': 25, '3': 60, '4': 180, '5': 225 } },
  q2: { responses: 500, average: 3.8, distribution: { '1': 30, '2': 45, '3': 90, '4': 160, '5': 175 } },
  q3: { responses: 498, average: 2.9, distribution: { '1': 80, '2': 120, '3': 140, '4': 100, '5': 58 } },
};

export const tools = [
  defineTool({
    name: 'get_stats',
    description: 'Pre-computed statistics for a survey question: response count, average rating (1-5) and distribution.',
    parameters: z.object({ question_id: z.string().describe('Question id, e.g. "q1"') }),
    execute: ({ question_id }) => STATS[question_id] ?? { error: `unknown question ${question_id}; known: ${Object.keys(STATS).join(', ')}` },
  }),
];

// Runs inside the sandbox before the model's first block: a helper the model may use.
export function sandboxSetup() {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const QUESTION_IDS = ['q1', 'q2', 'q3'];
}
