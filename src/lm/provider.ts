import { OpenAIModel, type OpenAIModelOptions } from './openai.js';
import type { LanguageModel } from './types.js';

/**
 * Resolves model names ("gpt-5-mini", "qwen2.5:7b") to the LanguageModel that serves them. The
 * engine only ever asks a provider; which client, endpoint and key stand behind a name is decided
 * here, at the edge.
 */
export interface ModelProvider {
  getModel(name: string): LanguageModel;
  /** The endpoint, for trajectory logs. */
  readonly baseURL?: string | undefined;
  /** Values to remove from anything written to disk (API keys). */
  readonly secrets?: readonly string[];
}

/** One LanguageModel for every name (a ScriptedModel in tests, a custom client). */
export function singleModelProvider(model: LanguageModel): ModelProvider {
  return { getModel: () => model };
}

/**
 * Every name served by one OpenAI-compatible endpoint through the official `openai` client. Throws
 * a ConfigurationError at once when the endpoint needs a key and none is given.
 */
export function openAIProvider(options: OpenAIModelOptions = {}): ModelProvider {
  const model = new OpenAIModel(options);
  return { getModel: () => model, baseURL: model.baseURL, secrets: model.apiKey ? [model.apiKey] : [] };
}

let defaultProvider: (() => ModelProvider) | undefined;

/**
 * Replaces the provider used by RLMs created without `languageModel`, `provider`, `baseURL` or
 * `apiKey` (by default: OpenAI, or OPENAI_BASE_URL, with OPENAI_API_KEY).
 */
export function setDefaultModelProvider(provider: ModelProvider | undefined): void {
  defaultProvider = provider && (() => provider);
}

/** How RLM options name their models: the first of these that is given wins. */
export function resolveModelProvider(options: {
  languageModel?: LanguageModel | undefined;
  provider?: ModelProvider | undefined;
  baseURL?: string | undefined;
  apiKey?: string | undefined;
  requestTimeoutMs?: number | undefined;
  idleTimeoutMs?: number | undefined;
}): ModelProvider {
  if (options.languageModel) return singleModelProvider(options.languageModel);
  if (options.provider) return options.provider;
  if (!options.baseURL && !options.apiKey && defaultProvider) return defaultProvider();
  return openAIProvider({
    ...(options.baseURL && { baseURL: options.baseURL }),
    ...(options.apiKey && { apiKey: options.apiKey }),
    ...(options.requestTimeoutMs && { timeoutMs: options.requestTimeoutMs }),
    ...(options.idleTimeoutMs && { idleTimeoutMs: options.idleTimeoutMs }),
  });
}
