// Aggregation over labelled records (the shape of OOLONG): one record a line, "date | user |
// label", and a counting question whose answer needs every line, computed exactly from the
// records written. A context holds as many whole records as fit in the size asked for.
import type { SeededRandom } from './seeded-random.js';
import type { GeneratedTask } from './task.js';

const LABELS = ['billing', 'shipping', 'refund', 'login', 'bug report', 'feature request', 'praise', 'spam'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const YEARS = [2023, 2024];
const HEADER = 'Support tickets, one a line: date | user | label\n';

export interface AggregateRecord {
  date: string;
  user: string;
  label: string;
}

interface Question {
  query: string;
  expected: string;
}

/** An aggregation task with a context of at most `size` characters. */
export function aggregateTask(random: SeededRandom, options: { id: string; size: number }): GeneratedTask {
  const records = fillRecords(random, options.size - HEADER.length);
  const question = askQuestion(random, records);
  return {
    id: options.id,
    query: `${question.query} Answer with the ${/^Which/.test(question.query) ? 'label' : 'number'} only.`,
    context: HEADER + records.map(recordLine).join(''),
    expected: question.expected,
  };
}

export function recordLine(record: AggregateRecord): string {
  return `${record.date} | ${record.user} | ${record.label}\n`;
}

function fillRecords(random: SeededRandom, budget: number): AggregateRecord[] {
  // About one user for every 20 records, so per-user questions have a handful of records to count.
  const userCount = Math.max(5, Math.floor(budget / 40 / 20));
  const records: AggregateRecord[] = [];
  for (let left = budget; ; ) {
    const record = { date: randomDate(random), user: `user_${String(random.below(userCount)).padStart(5, '0')}`, label: random.pick(LABELS) };
    const length = recordLine(record).length;
    if (length > left) return records;
    records.push(record);
    left -= length;
  }
}

function randomDate(random: SeededRandom): string {
  const month = random.between(1, 12);
  const day = random.between(1, 28);
  return `${random.pick(YEARS)}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

const QUESTIONS: ((random: SeededRandom, records: AggregateRecord[]) => Question | undefined)[] = [
  labelCount,
  labelCountAmongUsers,
  labelCountInMonth,
  usersWithLabel,
  mostCommonLabel,
];

function askQuestion(random: SeededRandom, records: AggregateRecord[]): Question {
  const first = random.below(QUESTIONS.length);
  // A question that has no single right answer here (a tie for the most common label) gives way to the next kind.
  for (let offset = 0; ; offset++) {
    const question = QUESTIONS[(first + offset) % QUESTIONS.length]!(random, records);
    if (question) return question;
  }
}

function count(records: AggregateRecord[], matches: (record: AggregateRecord) => boolean): string {
  return String(records.filter(matches).length);
}

function labelCount(random: SeededRandom, records: AggregateRecord[]): Question {
  const label = random.pick(LABELS);
  return { query: `How many records have the label "${label}"?`, expected: count(records, (record) => record.label === label) };
}

function labelCountAmongUsers(random: SeededRandom, records: AggregateRecord[]): Question {
  const label = random.pick(LABELS);
  const users = [...new Set(Array.from({ length: 3 }, () => random.pick(records).user))].sort();
  return {
    query: `How many records have the label "${label}" among the users ${users.join(', ')}?`,
    expected: count(records, (record) => record.label === label && users.includes(record.user)),
  };
}

function labelCountInMonth(random: SeededRandom, records: AggregateRecord[]): Question {
  const label = random.pick(LABELS);
  const month = random.between(1, 12);
  const year = random.pick(YEARS);
  const prefix = `${year}-${String(month).padStart(2, '0')}-`;
  return {
    query: `How many records with the label "${label}" are dated in ${MONTHS[month - 1]} ${year}?`,
    expected: count(records, (record) => record.label === label && record.date.startsWith(prefix)),
  };
}

function usersWithLabel(random: SeededRandom, records: AggregateRecord[]): Question {
  const label = random.pick(LABELS);
  const users = new Set(records.filter((record) => record.label === label).map((record) => record.user));
  return { query: `How many distinct users have at least one record with the label "${label}"?`, expected: String(users.size) };
}

function mostCommonLabel(_random: SeededRandom, records: AggregateRecord[]): Question | undefined {
  const counts = new Map<string, number>();
  for (const record of records) counts.set(record.label, (counts.get(record.label) ?? 0) + 1);
  const [first, second] = [...counts].sort((a, b) => b[1] - a[1]);
  if (!first || (second && second[1] === first[1])) return undefined;
  return { query: 'Which label occurs in the most records?', expected: first[0] };
}
