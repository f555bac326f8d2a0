// The sessions of a Streamable HTTP MCP server, held to two bounds: a session with nothing open (no
// request in flight, no notification stream) is released after an idle time, and the number held at
// once is capped (a new session takes the place of the oldest quiet one, or is refused when every
// one is busy). The proxy's program-facing /mcp and the provider's --serve-tools keep the same book.

/** One session in the book: the server's own object and what the book counts of it. */
export interface SessionEntry<S> {
  readonly session: S;
  /** Its id, once the session is initialized. */
  id?: string;
  /** HTTP responses of this session still open (a notification stream counts). */
  open: number;
  timer?: ReturnType<typeof setTimeout>;
}

export interface SessionBookOptions<S> {
  /** A session with nothing open is released after this long, in ms. */
  readonly idleMs: number;
  /** Sessions held at once. */
  readonly maxSessions: number;
  /**
   * After a session's notification stream (its GET) closes with nothing else open, it is released
   * this soon (at most `idleMs`): the MCP SDK's client closes its stream and sends no DELETE when it
   * closes. A client that only lost its stream reopens it within this time (the SDK's first retry is
   * at 1 s). Default {@link STREAM_GRACE_MS}.
   */
  readonly streamGraceMs?: number;
  /** Ends a released session (closes its server); `why` says for the log. */
  readonly release: (session: S, why: string) => void;
}

/** The default grace after a session's notification stream closed. */
export const STREAM_GRACE_MS = 5_000;

export class SessionBook<S> {
  private readonly byId = new Map<string, SessionEntry<S>>();

  constructor(private readonly options: SessionBookOptions<S>) {}

  get size(): number {
    return this.byId.size;
  }

  get maxSessions(): number {
    return this.options.maxSessions;
  }

  /** A new session's entry, not yet in the book (it joins with `add` once it has an id). */
  entry(session: S): SessionEntry<S> {
    return { session, open: 0 };
  }

  add(id: string, entry: SessionEntry<S>): void {
    entry.id = id;
    this.byId.set(id, entry);
  }

  get(id: string): SessionEntry<S> | undefined {
    return this.byId.get(id);
  }

  /** Every session held, oldest first. */
  sessions(): S[] {
    return [...this.byId.values()].map((entry) => entry.session);
  }

  /** The session ended by other means (a DELETE, its transport closed): forgotten, its timer stopped. */
  remove(entry: SessionEntry<S>): boolean {
    clearTimeout(entry.timer);
    if (entry.id === undefined || this.byId.get(entry.id) !== entry) return false;
    this.byId.delete(entry.id);
    return true;
  }

  /** Room for one more session: at once under the cap, else by releasing the oldest quiet one; false when every one is busy. */
  makeRoom(): boolean {
    if (this.byId.size < this.options.maxSessions) return true;
    for (const entry of this.byId.values()) {
      if (entry.open > 0) continue;
      this.release(entry, `the session limit (${this.options.maxSessions}) was reached`);
      return true;
    }
    return false;
  }

  /** Counts an open response of the session; once none is open, its release is timed. */
  track(entry: SessionEntry<S>, method: string | undefined, response: { once(event: "close", listener: () => void): unknown }): void {
    entry.open++;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    response.once("close", () => {
      entry.open--;
      if (entry.open > 0 || entry.id === undefined || this.byId.get(entry.id) !== entry) return;
      const stream = method === "GET";
      const quiet = stream ? Math.min(this.options.streamGraceMs ?? STREAM_GRACE_MS, this.options.idleMs) : this.options.idleMs;
      entry.timer = setTimeout(() => this.release(entry, stream ? "its notification stream closed" : "idle"), quiet);
      entry.timer.unref?.();
    });
  }

  release(entry: SessionEntry<S>, why: string): void {
    if (!this.remove(entry)) return;
    this.options.release(entry.session, why);
  }

  /** Forgets every session (their timers stopped) and returns them, for closing. */
  clear(): S[] {
    const all = [...this.byId.values()];
    this.byId.clear();
    for (const entry of all) clearTimeout(entry.timer);
    return all.map((entry) => entry.session);
  }
}
