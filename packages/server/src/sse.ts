// A `text/event-stream` read as the SSE format says (WHATWG HTML §9.2), as it arrives in pieces:
// lines end with LF, CRLF or CR (a CR last in a piece may be the first half of a CRLF); each event's
// `data` lines are joined by a line feed; an event is dispatched at a blank line when it had data; the
// last event id and the server's `retry` last as the stream goes; comments carry nothing; an event
// still open when the stream ends is not dispatched. Bounded: an event's data, and a line not yet
// ended, are held only up to `limit` characters; past it the event is counted, not kept.
// Read by the agents family (a program's `POST /run`) and the inward MCP relay (lean-post.ts).

/** One dispatched event, or one whose data grew past the limit (dropped, its size said). */
export type SseEvent = { readonly data: string; readonly event?: string } | { readonly oversized: number };

export class SseParser {
  /** The last event id the stream gave (it lasts until another replaces it). */
  lastEventId: string | undefined;
  /** The reconnection time the stream last gave, in milliseconds. */
  retry: number | undefined;
  private buffer = "";
  private data: string[] = [];
  private event: string | undefined;
  private size = 0;
  private hasData = false;
  private readonly events: SseEvent[] = [];

  constructor(private readonly limit: number) {}

  /** The events this piece of the stream completes. */
  push(text: string): SseEvent[] {
    this.buffer += text;
    this.lines(false);
    return this.events.splice(0);
  }

  /** The stream ended: a line ended by a last CR counts; an event still open is not dispatched. */
  end(): SseEvent[] {
    this.lines(true);
    this.buffer = "";
    return this.events.splice(0);
  }

  private lines(final: boolean): void {
    const buffer = this.buffer;
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      if (c === 13 && i === buffer.length - 1 && !final) break;
      this.line(buffer.slice(start, i));
      if (c === 13 && buffer.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
    }
    this.buffer = buffer.slice(start);
    // A line with no end in sight is held only up to the limit: its event is oversized.
    if (this.buffer.length > this.limit) {
      this.size = this.limit + 1;
      this.hasData = true;
      this.buffer = "";
    }
  }

  private line(text: string): void {
    if (text === "") {
      if (this.hasData) this.events.push(this.size > this.limit ? { oversized: this.size } : this.event === undefined ? { data: this.data.join("\n") } : { data: this.data.join("\n"), event: this.event });
      this.data = [];
      this.event = undefined;
      this.size = 0;
      this.hasData = false;
      return;
    }
    if (text.charCodeAt(0) === 58) return; // ":" a comment
    const colon = text.indexOf(":");
    const name = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (name === "data") {
      this.hasData = true;
      this.size += value.length + (this.data.length > 0 ? 1 : 0);
      // Past the limit the data is counted, not kept.
      if (this.size <= this.limit) this.data.push(value);
    } else if (name === "id") {
      if (!value.includes("\0")) this.lastEventId = value;
    } else if (name === "event") this.event = value;
    else if (name === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
  }
}
