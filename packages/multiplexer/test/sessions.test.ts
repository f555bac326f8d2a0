// The session book of a Streamable HTTP server: its cap and idle bound, with real timers and real
// HTTP responses on loopback (the proxy's program /mcp and diverge connect --serve-tools keep one).
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { SessionBook } from "../src/index.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** A loopback server whose requests stay open until `finish` is called; resolves with a way to make them. */
async function held(): Promise<{ open(): Promise<ServerResponse>; finish(response: ServerResponse): Promise<void> }> {
  const waiting: ((response: ServerResponse) => void)[] = [];
  const http = createServer((_request, response) => waiting.shift()?.(response));
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const port = (http.address() as AddressInfo).port;
  closers.push(async () => {
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  });
  return {
    open() {
      const arrived = new Promise<ServerResponse>((resolve) => waiting.push(resolve));
      void fetch(`http://127.0.0.1:${port}/`).then((response) => response.text()).catch(() => {});
      return arrived;
    },
    async finish(response) {
      const closed = new Promise<void>((resolve) => response.once("close", () => resolve()));
      response.end("done");
      await closed;
    },
  };
}

describe("SessionBook", () => {
  it("makes room by releasing the oldest quiet session, and refuses when every one is busy", async () => {
    const released: [string, string][] = [];
    const book = new SessionBook<string>({ idleMs: 60_000, maxSessions: 2, release: (session, why) => released.push([session, why]) });
    const http = await held();
    const a = book.entry("a");
    const b = book.entry("b");
    book.add("1", a);
    book.add("2", b);
    const busyA = await http.open();
    const busyB = await http.open();
    book.track(a, "POST", busyA);
    book.track(b, "GET", busyB);
    expect(book.makeRoom()).toBe(false);
    expect(released).toEqual([]);
    await http.finish(busyA);
    expect(book.makeRoom()).toBe(true);
    expect(released).toEqual([["a", "the session limit (2) was reached"]]);
    expect(book.sessions()).toEqual(["b"]);
    await http.finish(busyB);
    book.clear();
  });

  it("releases a session once it has been quiet for the idle time, and never one with a response open", async () => {
    const released: string[] = [];
    const book = new SessionBook<string>({ idleMs: 150, maxSessions: 10, release: (session, why) => released.push(`${session}: ${why}`) });
    const http = await held();
    const quiet = book.entry("quiet");
    const busy = book.entry("busy");
    book.add("q", quiet);
    book.add("b", busy);
    const first = await http.open();
    book.track(quiet, "POST", first);
    const open = await http.open();
    book.track(busy, "POST", open);
    await http.finish(first);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(released).toEqual(["quiet: idle"]);
    expect(book.get("q")).toBeUndefined();
    expect(book.sessions()).toEqual(["busy"]);
    // A session removed by other means is never released later.
    expect(book.remove(busy)).toBe(true);
    await http.finish(open);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(released).toEqual(["quiet: idle"]);
  });
});
