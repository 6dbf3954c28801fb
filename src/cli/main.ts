const USAGE = `rlm: answer questions about inputs far larger than a model's context window

Usage:
  rlm run --context <file> "question"

The run command is not available yet in this version; the sandbox runtime is.
`;

export function main(argv: string[]): number {
  process.stdout.write(USAGE);
  return argv.includes('--help') || argv.includes('-h') || argv.length === 0 ? 0 : 2;
}

process.exitCode = main(process.argv.slice(2));
