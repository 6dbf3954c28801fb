/** An OpenAI-compatible server on this machine that rlm can use without a key. */
export interface LocalServer {
  name: string;
  baseURL: string;
  /** Model ids it listed at /v1/models, in its order. */
  models: string[];
}

/**
 * The response header `rlm serve` sends (and its model list says `owned_by: "rlm"`): a run that
 * used it as its model would start an RLM inside an RLM, each inner run paid, so discovery skips it.
 */
export const RLM_SERVER_HEADER = 'x-rlm-server';

/** Where the common local servers listen by default, in the order they are tried. */
export const LOCAL_SERVER_CANDIDATES: readonly { name: string; baseURL: string }[] = [
  { name: 'Ollama', baseURL: 'http://127.0.0.1:11434/v1' },
  { name: 'LM Studio', baseURL: 'http://127.0.0.1:1234/v1' },
  { name: 'llama.cpp server', baseURL: 'http://127.0.0.1:8080/v1' },
  { name: 'vLLM', baseURL: 'http://127.0.0.1:8000/v1' },
];

/**
 * Asks every candidate's `/v1/models` at once and returns the first (in candidate order) that
 * answers with a model list and is not `rlm serve`. Nothing listening costs a refused connection,
 * so this takes about the slowest answer, at most `timeoutMs`.
 */
export async function findLocalServer(candidates = LOCAL_SERVER_CANDIDATES, timeoutMs = 1_000): Promise<LocalServer | undefined> {
  const answers = await Promise.all(candidates.map((candidate) => listModels(candidate.baseURL, timeoutMs)));
  const index = answers.findIndex((models) => models !== undefined);
  return index === -1 ? undefined : { ...candidates[index]!, models: answers[index]! };
}

async function listModels(baseURL: string, timeoutMs: number): Promise<string[] | undefined> {
  try {
    const response = await fetch(`${baseURL}/models`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok || response.headers.has(RLM_SERVER_HEADER)) return undefined;
    const body = (await response.json()) as { data?: { id?: unknown; owned_by?: unknown }[] };
    if (!Array.isArray(body.data)) return undefined;
    // rlm serve before it sent its header: every model it lists is owned by "rlm".
    if (body.data.length > 0 && body.data.every((model) => model?.owned_by === 'rlm')) return undefined;
    return body.data.flatMap((model) => (typeof model?.id === 'string' ? [model.id] : []));
  } catch {
    return undefined;
  }
}
