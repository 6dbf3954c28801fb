import { EXIT } from './usage-error.js';

/** The signals that stop a run, and the exit code each ends it with: 128 + the signal's number, as shells report. */
const STOP_SIGNALS = { SIGINT: EXIT.interrupted, SIGTERM: EXIT.terminated } as const;
type StopSignal = keyof typeof STOP_SIGNALS;

/** Why the CLI stopped a run: the signal that asked first decides the message and the exit code. */
export class Interruption extends Error {
  override name = 'Interruption';
  constructor(readonly signal: StopSignal) {
    super(`interrupted by ${signal}`);
  }

  get exitCode(): number {
    return STOP_SIGNALS[this.signal];
  }
}

interface SignalSource {
  on(signal: StopSignal, listener: () => void): unknown;
}

/**
 * Returns a signal that the first SIGINT or SIGTERM aborts with an Interruption, so the run stops
 * cleanly: sandboxes stopped, the log complete. A second one of either kind exits at once, with the
 * code of that second signal: whoever sends it no longer wants to wait.
 */
export function abortOnStopSignals(source: SignalSource = process, exit: (code: number) => void = (code) => process.exit(code)): AbortSignal {
  const controller = new AbortController();
  for (const signal of Object.keys(STOP_SIGNALS) as StopSignal[]) {
    source.on(signal, () => {
      if (controller.signal.aborted) exit(STOP_SIGNALS[signal]);
      else controller.abort(new Interruption(signal));
    });
  }
  return controller.signal;
}

/** Resolves once a stop signal arrived (at once if one already has): long-lived commands wait on it. */
export function stopRequested(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
