// print() and console: what a block prints goes to its output, bounded by the block's limit.
import { appendOutput, type BlockState } from './block-state.js';
import { printedText } from './error-text.js';
import { ArrayPrototypeJoin, ArrayPrototypePush, ObjectFreeze, newList } from './primordials.js';

interface Output {
  print: (...args: unknown[]) => void;
  console: Readonly<Record<string, (...args: unknown[]) => void>>;
}

export function createOutput(currentBlock: () => BlockState): Output {
  function printLine(args: unknown[]) {
    const block = currentBlock();
    const parts = newList<string>();
    for (let index = 0; index < args.length; index++) ArrayPrototypePush(parts, printedText(args[index], block.position));
    appendOutput(block, `${ArrayPrototypeJoin(parts, ' ')}\n`);
  }

  function print(...args: unknown[]) {
    printLine(args);
  }

  const log = (...args: unknown[]) => printLine(args);
  const console = ObjectFreeze({
    log,
    info: log,
    warn: log,
    error: log,
    debug: log,
    trace: log,
    dir: (value: unknown) => printLine([value]),
    table: (value: unknown) => printLine([value]),
  });
  return { print, console };
}
