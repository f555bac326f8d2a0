// The program's `POST /run` body, `text/event-stream`, read as the SSE format says: each event's
// `data` lines joined by a line feed is one chunk's JSON (agents.md §6.3); event names, ids, retry
// fields and comments carry nothing. An event still open when the stream ends is not dispatched.

/** One dispatched event's data, or an event whose data grew past the limit (dropped, its size said). */
export type SseItem = { readonly data: string } | { readonly oversized: number };

/** Every event of `body` in order; throws when the body dies (the relay ends as at a clean end). */
export async function* sseEvents(body: AsyncIterable<Uint8Array>, limit: number): AsyncGenerator<SseItem> {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  let size = 0;
  let hasData = false;
  const items: SseItem[] = [];
  const line = (text: string) => {
    if (text === "") {
      if (hasData) items.push(size > limit ? { oversized: size } : { data: data.join("\n") });
      data = [];
      size = 0;
      hasData = false;
      return;
    }
    if (text.charCodeAt(0) === 58) return; // ":" a comment
    const colon = text.indexOf(":");
    const name = colon < 0 ? text : text.slice(0, colon);
    if (name !== "data") return;
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    hasData = true;
    size += value.length + (data.length > 0 ? 1 : 0);
    // Past the limit the data is counted, not kept.
    if (size <= limit) data.push(value);
  };
  const lines = (final: boolean) => {
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      // A CR last in what has come may be the first half of a CRLF.
      if (c === 13 && i === buffer.length - 1 && !final) break;
      line(buffer.slice(start, i));
      if (c === 13 && buffer.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
    }
    buffer = buffer.slice(start);
    // A line with no end in sight is held only up to the limit.
    if (buffer.length > limit) {
      size = limit + 1;
      hasData = true;
      buffer = "";
    }
  };
  for await (const part of body) {
    buffer += decoder.decode(part, { stream: true });
    lines(false);
    while (items.length > 0) yield items.shift()!;
  }
  buffer += decoder.decode();
  lines(true);
  while (items.length > 0) yield items.shift()!;
}
