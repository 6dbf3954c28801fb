import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';

/** The sandbox's limits; also validated by RLM, so a bad limit is reported before a run starts. */
export const sandboxLimitsSchema = z.object({
  memoryLimitMb: z.number().int().min(16).max(65_536).default(DEFAULTS.sandbox.memoryLimitMb),
  blockTimeoutMs: z.number().int().min(1).default(DEFAULTS.sandbox.blockTimeoutMs),
  outputLimitChars: z.number().int().min(100).default(DEFAULTS.sandbox.outputLimitChars),
  maxHostCallChars: z.number().int().min(1_000).default(DEFAULTS.sandbox.maxHostCallChars),
  rssLimitMb: z.number().int().min(64).optional(),
  isolation: z.enum(['isolate', 'process']).default(DEFAULTS.sandbox.isolation),
});

/** The limits with their defaults filled in. */
export type SandboxLimits = z.output<typeof sandboxLimitsSchema>;
