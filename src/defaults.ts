/** Every default rlm uses, in one place. Options documentation refers to these values. */
export const DEFAULTS = {
  sandbox: {
    /** Heap limit of one sandbox isolate, in MB. The context counts against it. */
    memoryLimitMb: 1024,
    /** Execution time one block may use; time spent waiting for host calls does not count. */
    blockTimeoutMs: 60_000,
    /** Characters of output one block may print before the rest is cut. */
    outputLimitChars: 20_000,
    /**
     * Characters one host call (an llm_query prompt, tool arguments, ...) may send, checked in the
     * sandbox before anything reaches the host: a 100 MB prompt must pass, but a runaway one (a
     * whole context joined a few times over) must not cost the host its memory and event loop.
     */
    maxHostCallChars: 128 * 2 ** 20,
    /** Extra time past the block timeout before a worker that stopped responding is killed. */
    watchdogGraceMs: 2_000,
    /**
     * Execution time a block's report (its error, value and variables) gets even when the block used
     * all of its own. Making it takes milliseconds, unless the block left a getter or Proxy that
     * never returns in a variable.
     */
    reportAllowanceMs: 1_000,
    /** Prompts one llm_query_batched / rlm_query_batched call may carry: a million would exhaust the host. */
    maxBatchItems: 10_000,
    /** Levels of nesting one host call may carry; deeper values would overflow host-side serializers. */
    maxHostCallDepth: 64,
    /** How often a running worker's time and resident memory are checked, in ms. */
    watchdogIntervalMs: 250,
    /** How sandboxes are separated: an isolate each in shared worker processes, or a process each. */
    isolation: 'isolate' as 'isolate' | 'process',
    /** Most worker processes shared by sandboxes at once (fewer on machines with fewer cores). */
    maxWorkerProcesses: 8,
    /** Runs a shared worker process hosts over its life before it is retired and replaced. */
    runsPerWorker: 1_000,
    /** Resident memory of a shared worker process, in MB, past which it takes no new runs and is replaced. */
    workerRecycleRssMb: 3_072,
  },
  lm: {
    /** Requests in flight at once per model, shared by a run and its child runs. */
    maxConcurrency: 16,
    /** Retries of a failed model request (see OpenAIModelOptions.maxRetries for what is retried), honouring retry-after. */
    maxRetries: 3,
    /** Time one attempt of a model request may take, headers and whole body, in ms. */
    requestTimeoutMs: 600_000,
    /** Longest silence (no bytes at all) from the request on, headers included, in ms; a stalled attempt is cut and retried. */
    idleTimeoutMs: 120_000,
    /** Longest wait before a retry, in ms, whatever retry-after asks; waits end at once when the run ends. */
    maxRetryDelayMs: 60_000,
    /** Model calls one tool-calling loop may make before it gives up. */
    maxToolIterations: 10,
  },
  engine: {
    /** Root-model turns before the answer is forced in one more call. */
    maxIterations: 30,
    /** 1: no recursion; 2: one level of child RLMs. */
    maxDepth: 1,
    /** Child RLMs running at once per depth of the run tree. */
    maxConcurrentChildren: 4,
    /** Tokens a root model can read when neither the option nor the table of known models says: small enough for most models served today. */
    contextWindow: 32_768,
    /** Share of the context window, in percent, past which the conversation is compacted. */
    compactionThresholdPct: 85,
  },
  batch: {
    /** Tasks of a batch running at once (each is a whole run with its own sandbox). */
    concurrency: 4,
    /** Tries of a task whose failure may pass (an upstream still failing after rlm's own retries). */
    attempts: 3,
  },
  server: {
    host: '127.0.0.1',
    /** Not a port discovery probes (11434, 1234, 8080, 8000), nor one a common local tool takes. */
    port: 8431,
    /** Largest request body: a 100 MB context, escaped as JSON, fits. */
    maxBodyBytes: 256 * 2 ** 20,
    /** Runs answered at once (background ones included); more get 429 with retry-after. */
    maxConcurrentRuns: 32,
    /** Comment lines on a waiting stream, so proxies do not cut long runs, in ms. */
    keepAliveMs: 15_000,
    /** On shutdown, how long requests in progress may take to finish, in ms. */
    shutdownGraceMs: 30_000,
    /** How long a run that handed tool calls back waits for the results, in ms. */
    pausedRunTtlMs: 600_000,
    /** Paused runs kept at once; past it the oldest is stopped. */
    maxPausedRuns: 1_000,
    /** How long a finished response of the Responses API stays readable (GET /v1/responses/{id}), in ms. */
    responseTtlMs: 3_600_000,
    /** Finished responses kept at once; past it the oldest finished one is forgotten. */
    maxKeptResponses: 10_000,
  },
  cli: {
    /** Root model when neither --model nor RLM_MODEL names one. */
    model: 'gpt-5-mini',
  },
  queue: {
    /** Batch name when --name gives none: workers and the coordinator meet on it. */
    batchName: 'default',
    /** Largest task line a job carries, gzip-compressed (inline contexts travel in it), in bytes. */
    maxInlineBytes: 16 * 2 ** 20,
    /** First wait before a task is tried again, doubled at each try, in ms. */
    backoffMs: 5_000,
    /** Tasks one `rlm worker` runs at once. */
    concurrency: 4,
    /** On SIGTERM or Ctrl-C, how long running tasks may take to finish before they are handed back, in ms. */
    graceMs: 60_000,
    /**
     * How long a job stays a worker's without a sign of life, in ms: a worker renews it at half this
     * while it runs; after a kill -9 the job goes to another worker once it lapses.
     */
    lockDurationMs: 30_000,
    /** How often workers look for jobs whose worker has died, in ms. */
    stalledIntervalMs: 30_000,
    /** How often the coordinator looks for finished jobs, in ms. */
    collectIntervalMs: 250,
    /** How long a command waits for Redis to answer at start before it says it cannot reach it, in ms. */
    connectTimeoutMs: 10_000,
  },
  tools: {
    /** Parallel tool calls running at once in one executor batch. */
    maxConcurrency: 10,
    /** Time one tool call may take, in ms (long-running tools are exempt). */
    timeoutMs: 30_000,
  },
} as const;
