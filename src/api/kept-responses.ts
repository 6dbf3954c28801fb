import { formatDuration } from '../format.js';
import { ApiError } from './errors.js';
import type { LiveResponse } from './live-response.js';
import { realTimer, type ExpiryTimer } from './paused-runs.js';

/**
 * Responses stored for GET, streaming from a point and cancelling: kept while their run works and
 * for `ttlMs` once they are finished; past `max`, the oldest finished one is forgotten first. They
 * live in this process only.
 */
export class KeptResponses {
  private readonly byId = new Map<string, LiveResponse>();
  private readonly startTimer: ExpiryTimer;

  constructor(private readonly options: { ttlMs: number; max: number; startTimer?: ExpiryTimer }) {
    this.startTimer = options.startTimer ?? realTimer;
  }

  keep(response: LiveResponse): void {
    // A Map iterates in insertion order: the first finished response found is the oldest.
    for (const [id, kept] of this.byId) {
      if (this.byId.size < this.options.max) break;
      if (kept.finished) this.byId.delete(id);
    }
    this.byId.set(response.id, response);
    void response.settled.then(() => this.startTimer(() => this.byId.delete(response.id), this.options.ttlMs));
  }

  /** The response with this id; a 404 that says why there may be none. */
  get(id: string): LiveResponse {
    const response = this.byId.get(id);
    if (response) return response;
    throw new ApiError(
      404,
      'not_found_error',
      `No response ${id}: it expired (finished responses are kept ${formatDuration(this.options.ttlMs)}), was created with store: false, or never existed.`,
      'response_id',
      'response_not_found',
    );
  }

  /** Resolves once no kept response has a run working. */
  async idle(): Promise<void> {
    await Promise.all([...this.byId.values()].map((response) => response.settled));
  }

  /** Stops every run still working (the server is shutting down). */
  closeAll(reason: unknown): void {
    for (const response of this.byId.values()) response.cancel(reason);
  }
}
