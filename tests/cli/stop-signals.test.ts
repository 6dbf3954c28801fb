import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { abortOnStopSignals, Interruption } from '../../src/cli/stop-signals.js';

function signalledProcess() {
  const events = new EventEmitter();
  const exits: number[] = [];
  const interrupt = abortOnStopSignals(events, (code) => exits.push(code));
  return { events, exits, interrupt };
}

describe('abortOnStopSignals', () => {
  it('aborts on the first SIGTERM with an Interruption that calls for exit code 143', () => {
    const { events, exits, interrupt } = signalledProcess();
    events.emit('SIGTERM');
    expect(interrupt.reason).toBeInstanceOf(Interruption);
    expect(interrupt.reason).toMatchObject({ signal: 'SIGTERM', exitCode: 143, message: 'interrupted by SIGTERM' });
    expect(exits).toEqual([]);
  });

  it('aborts on the first SIGINT with exit code 130', () => {
    const { events, interrupt } = signalledProcess();
    events.emit('SIGINT');
    expect(interrupt.reason).toMatchObject({ signal: 'SIGINT', exitCode: 130 });
  });

  it('exits at once on a second signal, with the code of that signal', () => {
    const first = signalledProcess();
    first.events.emit('SIGINT');
    first.events.emit('SIGTERM');
    expect(first.exits).toEqual([143]);
    expect(first.interrupt.reason).toMatchObject({ signal: 'SIGINT' });

    const second = signalledProcess();
    second.events.emit('SIGTERM');
    second.events.emit('SIGINT');
    expect(second.exits).toEqual([130]);
  });
});
