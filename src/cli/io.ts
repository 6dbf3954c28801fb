/** What a command gets of the process: its streams, environment, standard input and stop signal. */
export interface CommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  env: NodeJS.ProcessEnv;
  /** Rejects with the interrupt's reason when it is aborted: standard input may never end. */
  readStdin: () => Promise<Buffer>;
  /** Aborted on Ctrl-C or SIGTERM, with an Interruption that says which. */
  interrupt: AbortSignal;
}
