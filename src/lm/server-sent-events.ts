/**
 * The `data` of each server-sent event in `body`, in order (multi-line data joined with "\n";
 * comments, `event:`, `id:` and `retry:` fields skipped). `onChunk` is called for every chunk of
 * bytes, so a caller can tell a live stream from a stalled one. An event still open when the body
 * ends is dropped, as the SSE specification says: it was cut. A connection that fails mid-body
 * rejects with the transport's error. Stopping the iteration early cancels the body.
 */
export async function* readServerSentEvents(body: ReadableStream<Uint8Array>, onChunk: () => void): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      onChunk();
      const text = pending + decoder.decode(value, { stream: true });
      // A trailing "\r" waits for the next chunk: it may be the first half of "\r\n".
      const end = text.endsWith('\r') ? text.length - 1 : text.length;
      const lines = text.slice(0, end).split(/\r\n|\r|\n/);
      pending = lines.pop()! + text.slice(end);
      for (const line of lines) {
        if (line === '') {
          if (data.length > 0) yield data.join('\n');
          data = [];
        } else if (line.startsWith('data:')) {
          data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
        }
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
