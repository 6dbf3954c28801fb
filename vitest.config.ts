import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    // Sandboxes are child processes; two cores are shared between test files and workers.
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default', './tests/summary-reporter.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
