/** A question whose one right answer is hidden in a long text. */
export interface NeedleTask {
  context: string;
  question: string;
  /** The text a right answer contains. */
  answer: string;
}

const FILLER = [
  'The quarterly report was filed on time and reviewed by the committee.',
  'Rain is expected in the north for most of the week.',
  'The warehouse on Dock Street keeps its spare parts on the third floor.',
  'Several readers asked for a longer chapter on the history of the canal.',
  'The meeting moved to the small room because the projector was broken.',
  'Every invoice lists its due date and the name of the clerk who wrote it.',
];

/**
 * Needle task number `index`: a text of `sentences` filler sentences (decoys with other items'
 * codes among them) hiding "The secret code of item N is XXX-NNN.", and the question that asks
 * for it. Different indexes give different items, codes and positions.
 */
export function needleTask(index: number, sentences = 120): NeedleTask {
  const item = 1000 + ((index * 7919) % 9000);
  const answer = codeFor(index);
  const lines: string[] = [];
  for (let position = 0; position < sentences; position++) {
    lines.push(position % 17 === 5 ? `The secret code of item ${item + 1 + position} is ${codeFor(index + position + 1)}.` : FILLER[(index + position) % FILLER.length]!);
  }
  lines.splice((index * 31) % sentences, 0, `The secret code of item ${item} is ${answer}.`);
  return { context: lines.join(' '), question: `What is the secret code of item ${item}?`, answer };
}

function codeFor(index: number): string {
  const letters = Array.from({ length: 3 }, (_, position) => String.fromCharCode(65 + ((index * (position + 3) * 7 + position * 11) % 26))).join('');
  return `${letters}-${String(100 + ((index * 37) % 900))}`;
}
