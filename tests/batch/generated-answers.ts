// Recomputes the answer of a generated task from its context alone, by reading the context the way
// a person would (find the needle, count the records), never by calling the generators' code.

export interface TaskLine {
  id: string;
  query: string;
  context: string;
  expected: string;
}

/** The value of the one needle in a sniah context, after checking it is the only one and matches the query's key. */
export function sniahAnswer(task: TaskLine): string {
  const key = /magic number for (\S+) mentioned/.exec(task.query)?.[1];
  if (!key) throw new Error(`no key in the query of ${task.id}: ${task.query}`);
  const needles = [...task.context.matchAll(/The special magic number for (\S+) is: (\d+)\./g)];
  if (needles.length !== 1) throw new Error(`${task.id} has ${needles.length} needles`);
  const [, needleKey, value] = needles[0]!;
  if (needleKey !== key) throw new Error(`${task.id}: the query asks for ${key}, the needle holds ${needleKey}`);
  if (task.context.split(key).length !== 2) throw new Error(`${task.id}: the key ${key} appears more than once`);
  const numbers = task.context.match(/\d+/g) ?? [];
  if (numbers.length !== 1) throw new Error(`${task.id}: the context holds ${numbers.length} numbers, so the answer is not unique`);
  return value!;
}

interface Row {
  date: string;
  user: string;
  label: string;
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/** The answer to an aggregate task's question, counted from its records. */
export function aggregateAnswer(task: TaskLine): { kind: string; answer: string } {
  const rows = aggregateRows(task);
  const query = task.query;
  let match: RegExpExecArray | null;
  if ((match = /^How many records have the label "(.+)" among the users (.+)\?/.exec(query))) {
    const [label, users] = [match[1]!, match[2]!.split(', ')];
    return { kind: 'among users', answer: String(rows.filter((row) => row.label === label && users.includes(row.user)).length) };
  }
  if ((match = /^How many records have the label "(.+)"\?/.exec(query))) {
    return { kind: 'label', answer: String(rows.filter((row) => row.label === match![1]).length) };
  }
  if ((match = /^How many records with the label "(.+)" are dated in (\w+) (\d{4})\?/.exec(query))) {
    const prefix = `${match[3]}-${String(MONTHS.indexOf(match[2]!) + 1).padStart(2, '0')}-`;
    return { kind: 'month', answer: String(rows.filter((row) => row.label === match![1] && row.date.startsWith(prefix)).length) };
  }
  if ((match = /^How many distinct users have at least one record with the label "(.+)"\?/.exec(query))) {
    return { kind: 'distinct users', answer: String(new Set(rows.filter((row) => row.label === match![1]).map((row) => row.user)).size) };
  }
  if (/^Which label occurs in the most records\?/.test(query)) return { kind: 'most common', answer: mostCommon(rows, task.id) };
  throw new Error(`${task.id}: a question of an unknown kind: ${query}`);
}

function aggregateRows(task: TaskLine): Row[] {
  const [header, ...lines] = task.context.split('\n');
  if (header !== 'Support tickets, one a line: date | user | label') throw new Error(`${task.id}: header ${header}`);
  if (lines.pop() !== '') throw new Error(`${task.id}: the context does not end with a whole line`);
  return lines.map((line) => {
    const match = /^(\d{4}-\d{2}-\d{2}) \| (user_\d{5}) \| ([a-z ]+)$/.exec(line);
    if (!match) throw new Error(`${task.id}: a line that is not a record: ${line}`);
    return { date: match[1]!, user: match[2]!, label: match[3]! };
  });
}

function mostCommon(rows: Row[], id: string): string {
  const counts = new Map<string, number>();
  for (const row of rows) counts.set(row.label, (counts.get(row.label) ?? 0) + 1);
  const sorted = [...counts].sort((a, b) => b[1] - a[1]);
  if (sorted[1] && sorted[1][1] === sorted[0]![1]) throw new Error(`${id}: a tie for the most common label`);
  return sorted[0]![0];
}

/** The size a task id names ("sniah-3-64k" -> 64000). */
export function sizeOfId(id: string): number {
  const match = /-(\d+(?:\.\d+)?)([km]?)$/.exec(id);
  if (!match) throw new Error(`no size in id ${id}`);
  return Math.round(Number(match[1]) * { '': 1, k: 1_000, m: 1_000_000 }[match[2] as '' | 'k' | 'm']);
}
