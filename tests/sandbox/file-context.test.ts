import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigurationError, fileContext, RLM } from '../../src/index.js';
import { ScriptedModel } from '../../src/testing.js';
import { createSandbox } from './helpers.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';
import { thrownBy } from '../rejection.js';

const folder = tempFolder('rlm-file-context-');

describe('a context read from a file by the worker', () => {
  it('is the file\'s text in the sandbox, also after a reset', async () => {
    const path = join(folder, 'notes.txt');
    writeFileSync(path, 'héllo from a file ✓');
    const sandbox = await createSandbox({ memoryLimitMb: 64 });
    await sandbox.setContext(fileContext(path));
    expect((await sandbox.execute('print(typeof context, context)')).stdout).toBe('string héllo from a file ✓\n');
    const crash = await sandbox.execute('const all = []; while (true) all.push(new Array(1e6).fill(1))');
    expect(crash.reset).toBe(true);
    expect((await sandbox.execute('context.length')).stdout).toBe('19\n');
  });

  it('is described to the root model by its size, without the host reading it', async () => {
    const path = join(folder, 'big.txt');
    writeFileSync(path, 'x'.repeat(3_000_000));
    const root = new ScriptedModel([repl('FINAL(String(context.length))')]);
    const result = await new RLM({ model: 'root', languageModel: root }).completion({ context: fileContext(path), query: 'how long?' });
    expect(result.response).toBe('3000000');
    expect(JSON.stringify(root.calls[0]!.messages)).toContain('Your context is a string of about 3,000,000 characters (a text file of 3,000,000 bytes).');
  });

  it('refuses a path that is not a file', () => {
    expect(thrownBy(() => fileContext(join(folder, 'missing.txt')), ConfigurationError).code).toBe('configuration_error');
    expect(thrownBy(() => fileContext(folder), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/is not a file/) });
  });
});
