/** One line of a tasks file, as `rlm batch` reads it. */
export interface GeneratedTask {
  id: string;
  query: string;
  context: string;
  /** The right answer, as text: what an exact scorer compares the model's answer with. */
  expected: string;
}
