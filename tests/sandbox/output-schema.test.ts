import { describe, expect, it } from 'vitest';
import { createSandbox } from './helpers.js';

const schema = { type: 'object', properties: { total: { type: 'number' } }, required: ['total'] };
const refusal = 'FINAL refused:\n{{problems}}';

describe('the output schema in the worker', () => {
  it('checks FINAL without the host, also after a reset, and records the refused values', async () => {
    const sandbox = await createSandbox({
      memoryLimitMb: 64,
      onHostCall: () => {
        throw new Error('FINAL must not reach the host');
      },
    });
    await sandbox.setOutputSchema({ schema, refusal });
    const refused = await sandbox.execute('FINAL({ total: "7" })', { checkFinal: true });
    expect(refused.error?.name).toBe('TypeError');
    expect(refused.error?.message).toBe('FINAL refused:\n- total: expected number, received string');
    expect(refused.rejectedFinals).toEqual([{ answer: '{"total":"7"}', problems: ['total: expected number, received string'] }]);
    const crash = await sandbox.execute('const all = []; while (true) all.push(new Array(1e6).fill(1))');
    expect(crash.reset).toBe(true);
    const again = await sandbox.execute('try { FINAL({}) } catch (error) { print(error.message) } FINAL({ total: 7 })', { checkFinal: true });
    expect(again.stdout).toBe('FINAL refused:\n- total: missing (expected number)\n');
    expect(again.final).toBe('{"total":7}');
    await sandbox.setOutputSchema(undefined);
    expect((await sandbox.execute('FINAL({ total: "7" })', { checkFinal: true })).final).toBe('{"total":"7"}');
  });
});
