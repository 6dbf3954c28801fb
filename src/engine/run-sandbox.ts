import type { ChatMessage } from '../lm/types.js';
import { Sandbox } from '../sandbox/sandbox.js';
import type { BlockServices } from './block-services.js';
import { finalRefusalTemplate, type SessionNames } from './prompts.js';
import type { BlockScope } from './host-calls.js';
import type { RunSettings, SessionState } from './run-types.js';

interface RunSandboxOptions {
  context: unknown;
  /** A session's sandbox is reused, and kept when the run ends. */
  session: SessionState | undefined;
  settings: Pick<RunSettings, 'sandbox' | 'setupCode'>;
  services: BlockServices;
  /** Bounds the loading of the run's inputs. */
  signal: AbortSignal;
}

/**
 * A run's sandbox. It starts (or, in a session, is reused) and loads the run's inputs while the root
 * model thinks about its first reply; blocks wait for `ready`. In a session the first context is
 * context_0 (also `context`), later ones context_1, ...; the previous completion's conversation
 * arrives as history_N, loaded under this run's limits.
 */
export class RunSandbox {
  readonly names: SessionNames;
  readonly #session: SessionState | undefined;
  readonly #ready: Promise<Sandbox<BlockScope>>;
  /** Why the sandbox could not start, once known. */
  #failure: { error: unknown } | undefined;

  constructor(options: RunSandboxOptions) {
    const { session } = options;
    this.#session = session;
    const contextIndex = session ? session.contexts++ : undefined;
    const history = session?.lastMessages && { name: `history_${session.histories++}`, messages: session.lastMessages };
    if (session) session.lastMessages = undefined;
    this.names = { contextIndex, histories: session?.histories ?? 0 };
    this.#ready = this.#load(options, history);
    this.#ready.catch((error: unknown) => (this.#failure = { error })); // see throwIfFailed
  }

  /**
   * Throws why the sandbox could not start (setup code that throws, a context that cannot load), if
   * that is known by now: before each model call, so a run whose replies carry no code yet does not
   * go on paying for calls whose code could never run.
   */
  throwIfFailed(): void {
    if (this.#failure) throw this.#failure.error;
  }

  /** The sandbox, once started with the run's inputs loaded. */
  get ready(): Promise<Sandbox<BlockScope>> {
    return this.#ready;
  }

  /** Loads every message compactions replaced, as `history`. */
  async loadHistory(messages: ChatMessage[], signal: AbortSignal): Promise<void> {
    await (await this.#ready).setContext(messages, 'history', { signal });
  }

  /** Stops the sandbox, unless a session keeps it for its next completion. */
  async dispose(): Promise<void> {
    if (!this.#session) await this.#ready.then((sandbox) => sandbox.dispose(), () => {});
  }

  async #load({ context, settings, services, signal }: RunSandboxOptions, history: { name: string; messages: ChatMessage[] } | undefined): Promise<Sandbox<BlockScope>> {
    const session = this.#session;
    const { contextIndex } = this.names;
    const sandbox = session?.sandbox ?? (await createSandbox(settings, services));
    if (session) session.sandbox = sandbox;
    try {
      // Set for every run: a session's later completion may have another schema, or none.
      const blockSchema = services.output?.blockSchema;
      await sandbox.setOutputSchema(blockSchema && { schema: blockSchema, refusal: finalRefusalTemplate() });
      if (history) await sandbox.setContext(history.messages, history.name, { signal });
      if (!contextIndex) await sandbox.setContext(context ?? '', 'context', { signal });
      if (contextIndex !== undefined) await sandbox.setContext(context ?? '', `context_${contextIndex}`, { signal });
    } catch (error) {
      if (!session) await sandbox.dispose();
      throw error;
    }
    return sandbox;
  }
}

/** A new sandbox with the run's tools and setup code. */
async function createSandbox(settings: RunSandboxOptions['settings'], services: BlockServices): Promise<Sandbox<BlockScope>> {
  const sandbox = await Sandbox.create<BlockScope>({ ...settings.sandbox, ...services.handlers });
  try {
    if (services.toolSpecs.length > 0) await sandbox.setTools(services.toolSpecs, { asyncTools: services.asyncTools });
    for (const code of settings.setupCode) await sandbox.addSetupCode(code);
  } catch (error) {
    await sandbox.dispose();
    throw error;
  }
  return sandbox;
}
