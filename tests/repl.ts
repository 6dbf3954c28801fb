/** A root-model reply that runs `code` as one REPL block: the fenced form the run loop looks for. */
export const repl = (code: string) => '```repl\n' + code + '\n```';
