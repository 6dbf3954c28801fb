// S-NIAH (single needle in a haystack, as in the RLM paper): one key/value fact hidden at a random
// place in filler prose; the question asks for the value. The filler has no digits, no hyphens and
// never says "magic number", so the needle is the only place the answer or its key can be found,
// and the context is exactly the size asked for.
import type { SeededRandom } from './seeded-random.js';
import type { GeneratedTask } from './task.js';

const ADJECTIVES = [
  'quiet', 'amber', 'distant', 'hollow', 'silver', 'crooked', 'gentle', 'restless', 'narrow', 'ancient',
  'bright', 'frozen', 'velvet', 'rusty', 'patient', 'scarlet', 'humble', 'windy', 'golden', 'bitter',
];
const NOUNS = [
  'harbor', 'lantern', 'orchard', 'meadow', 'falcon', 'river', 'library', 'compass', 'village', 'engine',
  'garden', 'mountain', 'teacher', 'market', 'bridge', 'window', 'forest', 'sailor', 'kettle', 'tower',
];
const VERBS = ['watched', 'carried', 'followed', 'remembered', 'painted', 'crossed', 'found', 'described', 'ignored', 'measured'];
const LINKS = ['while', 'because', 'although', 'before', 'after', 'until', 'since', 'and'];

/** A needle task with a context of exactly `size` characters. */
export function sniahTask(random: SeededRandom, options: { id: string; size: number }): GeneratedTask {
  const key = `${random.pick(ADJECTIVES)}-${random.pick(NOUNS)}`;
  const value = String(random.between(1_000_000, 9_999_999));
  const needle = `The special magic number for ${key} is: ${value}. `;
  const filler = fillerProse(random, options.size - needle.length);
  const at = sentenceStartNear(filler, random.below(filler.length + 1));
  return {
    id: options.id,
    query: `What is the special magic number for ${key} mentioned in the provided text? Answer with the number only.`,
    context: filler.slice(0, at) + needle + filler.slice(at),
    expected: value,
  };
}

/** Prose of exactly `length` characters (the last sentence is cut where the length ends). */
function fillerProse(random: SeededRandom, length: number): string {
  const sentences: string[] = [];
  let written = 0;
  while (written < length) {
    const sentence = fillerSentence(random);
    sentences.push(sentence);
    written += sentence.length;
  }
  return sentences.join('').slice(0, length);
}

function fillerSentence(random: SeededRandom): string {
  const clause = () => `the ${random.pick(ADJECTIVES)} ${random.pick(NOUNS)} ${random.pick(VERBS)} the ${random.pick(NOUNS)}`;
  const text = `${clause()} ${random.pick(LINKS)} ${clause()}`;
  return `${text[0]!.toUpperCase()}${text.slice(1)}. `;
}

/** The start of the first sentence at or after `offset` (the end of the text if none). */
function sentenceStartNear(text: string, offset: number): number {
  if (offset === 0) return 0;
  const end = text.indexOf('. ', offset - 1);
  return end === -1 ? text.length : end + 2;
}
