/** Every default rlm uses, in one place. Options documentation refers to these values. */
export const DEFAULTS = {
  sandbox: {
    /** Heap limit of one sandbox isolate, in MB. The context counts against it. */
    memoryLimitMb: 1024,
    /** Execution time one block may use; time spent waiting for host calls does not count. */
    blockTimeoutMs: 60_000,
    /** Characters of output one block may print before the rest is cut. */
    outputLimitChars: 20_000,
    /** Extra time past the block timeout before a worker that stopped responding is killed. */
    watchdogGraceMs: 2_000,
  },
} as const;
