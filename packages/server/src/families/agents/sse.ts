// The program's `POST /run` body, `text/event-stream`, read with the SSE parser (../../sse.ts): each
// event's `data` lines joined by a line feed is one chunk's JSON (agents.md §6.3); event names, ids,
// retry fields and comments carry nothing.
import { SseParser } from "../../sse.js";

/** One dispatched event's data, or an event whose data grew past the limit (dropped, its size said). */
export type SseItem = { readonly data: string } | { readonly oversized: number };

/** Every event of `body` in order; throws when the body dies (the relay ends as at a clean end). */
export async function* sseEvents(body: AsyncIterable<Uint8Array>, limit: number): AsyncGenerator<SseItem> {
  const decoder = new TextDecoder();
  const parser = new SseParser(limit);
  const item = (event: ReturnType<SseParser["push"]>[number]): SseItem => ("data" in event ? { data: event.data } : event);
  for await (const part of body) for (const event of parser.push(decoder.decode(part, { stream: true }))) yield item(event);
  for (const event of [...parser.push(decoder.decode()), ...parser.end()]) yield item(event);
}
