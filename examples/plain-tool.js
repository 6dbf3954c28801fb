// A setup file with no imports at all: a tool as a plain object with a JSON Schema.
export const tools = [
  {
    name: 'word_count',
    description: 'Count the words in a text.',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    execute: ({ text }) => ({ words: text.split(/\s+/).filter(Boolean).length }),
  },
];

export const sandboxSetup = 'const STOP_WORDS = ["the", "a", "an", "of"];';
