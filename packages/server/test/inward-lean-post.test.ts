// The proxy's own reading of a relayed MCP call's answer (lean-post.ts): the SSE parser against every
// way a stream can be cut into pieces, and the POST itself against a real MCP server of the SDK on
// loopback (its JSON and SSE modes), a server that answers in ways the SDK's transport has rules for,
// and a server that stops answering mid-stream.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { SseParser } from "../src/sse.js";
import { InwardMcp } from "../src/families/mcp-inward/inward-mcp.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("the SSE parser of a relayed call's stream", () => {
  const events = fc.array(
    fc.record({
      data: fc.array(fc.string({ unit: fc.constantFrom("a", "{", "\"", " ", ":", "é", "1") }), { minLength: 1, maxLength: 3 }),
      id: fc.option(fc.stringMatching(/^[a-z0-9_-]{1,8}$/), { nil: undefined }),
      retry: fc.option(fc.nat(5000), { nil: undefined }),
    }),
    { minLength: 1, maxLength: 6 },
  );
  it("reads the same events however the stream is cut, with LF, CRLF or CR line ends and comments", () => {
    fc.assert(
      fc.property(events, fc.constantFrom("\n", "\r\n", "\r"), fc.array(fc.nat(), { maxLength: 8 }), (sent, end, cuts) => {
        let text = ": a comment" + end;
        for (const event of sent) {
          if (event.id !== undefined) text += `id: ${event.id}${end}`;
          if (event.retry !== undefined) text += `retry:${event.retry}${end}`;
          for (const line of event.data) text += `data: ${line}${end}`;
          text += end;
        }
        const points = [...new Set(cuts.map((cut) => cut % (text.length + 1)))].sort((a, b) => a - b);
        const parser = new SseParser(1 << 20);
        const got = [];
        let from = 0;
        for (const point of [...points, text.length]) {
          got.push(...parser.push(text.slice(from, point)));
          from = point;
        }
        got.push(...parser.end());
        expect(got).toEqual(sent.map((event) => ({ data: event.data.join("\n") })));
        // The last event id and retry last until another replaces them.
        expect(parser.lastEventId).toEqual([...sent].reverse().find((event) => event.id !== undefined)?.id);
        expect(parser.retry).toEqual([...sent].reverse().find((event) => event.retry !== undefined)?.retry);
      }),
    );
  });
});

/** Whether the SDK's server transport holds the session's notification stream (its GET) now; the SDK has no public way to ask. */
function standaloneOpen(transport: StreamableHTTPServerTransport): boolean {
  return (transport as unknown as { _webStandardTransport: { _streamMapping: Map<string, unknown> } })._webStandardTransport._streamMapping.has("_GET_stream");
}

/** A real MCP server of the SDK, one session per initialize, answering as JSON or as SSE. */
async function sdkServer(json: boolean): Promise<{ url: URL; close(): Promise<void>; started: unknown[]; cancelled: unknown[]; connections(): number }> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const started: unknown[] = [];
  const cancelled: unknown[] = [];
  const make = () => {
    const server = new McpServer({ name: "far", version: "1.0.0" });
    server.registerTool("echo", { inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: "text", text }] }));
    server.registerTool("slow", { inputSchema: {} }, async (_args, extra) => {
      started.push(extra.requestId);
      await new Promise<void>((resolve) => extra.signal.addEventListener("abort", () => resolve(), { once: true }));
      cancelled.push(extra.requestId);
      return { content: [] };
    });
    server.registerTool("steps", { inputSchema: {} }, async (_args, extra) => {
      const token = extra._meta?.progressToken;
      // Answering as JSON, the SDK's server drops notifications tied to a request: progress goes
      // on the session's notification stream (the GET) instead, as a server may send it.
      if (json) await until(() => standaloneOpen(transport), "the session's notification stream at the server");
      for (let step = 1; step <= 3; step++) {
        const progress = { method: "notifications/progress" as const, params: { progressToken: token!, progress: step, total: 3 } };
        if (token !== undefined) await (json ? server.server.notification(progress) : extra.sendNotification(progress));
      }
      return { content: [{ type: "text", text: "stepped" }] };
    });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: json,
      onsessioninitialized: (id) => void transports.set(id, transport),
    });
    void server.connect(transport);
    return transport;
  };
  const front = http.createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const id = request.headers["mcp-session-id"];
    const transport = typeof id === "string" ? transports.get(id) : make();
    if (!transport) return void response.writeHead(404).end("no such session");
    await transport.handleRequest(request, response, body);
  });
  let connections = 0;
  front.on("connection", () => connections++);
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
  return {
    url: new URL(`http://127.0.0.1:${(front.address() as AddressInfo).port}/mcp`),
    connections: () => connections,
    started,
    cancelled,
    close: async () => {
      front.closeAllConnections();
      await new Promise<void>((resolve) => front.close(() => resolve()));
    },
  };
}

async function inwardTo(url: URL): Promise<InwardMcp> {
  const inward = new InwardMcp(url, () => {});
  cleanups.push(() => inward.close());
  return inward;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("the SSE parser's bound", () => {
  it("counts an event past the limit instead of keeping it, and a line that never ends too", () => {
    const parser = new SseParser(10);
    expect(parser.push("data: 0123456789ABC\n\ndata: ok\n\n")).toEqual([{ oversized: 13 }, { data: "ok" }]);
    expect(parser.push("data: " + "x".repeat(50))).toEqual([]);
    expect(parser.push("\n\n")).toEqual([{ oversized: 11 }]);
  });
});

describe.each([
  { mode: "JSON", json: true },
  { mode: "SSE", json: false },
])("a relayed call to a real MCP server answering as $mode", ({ json }) => {
  it("is answered, many at once on one session, with its result checked and defaults filled in as the SDK's client does", { timeout: 120_000 }, async () => {
    const server = await sdkServer(json);
    cleanups.push(() => server.close());
    const inward = await inwardTo(server.url);
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, k) => inward.exchange({ method: "tools/call", params: { name: "echo", arguments: { text: `n${k}` } } })));
    expect(outcomes).toEqual(Array.from({ length: 40 }, (_, k) => ({ result: { content: [{ type: "text", text: `n${k}` }] } })));
    expect(await inward.exchange({ method: "tools/call", params: { name: "nope", arguments: {} } })).toMatchObject({ result: { isError: true } });
    expect(inward.sessionsMade).toBe(1);
  });

  it("keeps its connections: calls one after another reuse the session's few", { timeout: 120_000 }, async () => {
    const server = await sdkServer(json);
    cleanups.push(() => server.close());
    const inward = await inwardTo(server.url);
    expect(await inward.exchange({ method: "tools/list", params: null })).toMatchObject({ result: { tools: expect.any(Array) } });
    const before = server.connections();
    for (let k = 0; k < 20; k++) expect(await inward.exchange({ method: "tools/call", params: { name: "echo", arguments: { text: `s${k}` } } })).toEqual({ result: { content: [{ type: "text", text: `s${k}` }] } });
    // A connection per call would be 20; an SSE answer's connection is free again once the server ends its stream.
    expect(server.connections() - before).toBeLessThanOrEqual(10);
  });

  it("brings the call's progress back with the asker's own token", { timeout: 120_000 }, async () => {
    const server = await sdkServer(json);
    cleanups.push(() => server.close());
    const inward = await inwardTo(server.url);
    const seen: unknown[] = [];
    const subscribed = await inward.subscribe((notification) => seen.push(notification));
    expect("unsubscribe" in subscribed).toBe(true);
    const outcome = await inward.exchange({ method: "tools/call", params: { name: "steps", arguments: {}, _meta: { progressToken: "mine" } } });
    expect(outcome).toEqual({ result: { content: [{ type: "text", text: "stepped" }] } });
    await until(() => seen.length >= 3, "three progress notifications");
    expect(seen).toEqual([1, 2, 3].map((progress) => ({ method: "notifications/progress", params: { progress, total: 3, progressToken: "mine" } })));
  });

  it("is cancelled at the server when the asker gives it up", { timeout: 120_000 }, async () => {
    const server = await sdkServer(json);
    cleanups.push(() => server.close());
    const inward = await inwardTo(server.url);
    const asker = new AbortController();
    const pending = inward.exchange({ method: "tools/call", params: { name: "slow", arguments: {} } }, undefined, { signal: asker.signal });
    await until(() => server.started.length === 1, "the call at the server");
    asker.abort("the provider left");
    expect(await pending).toEqual({ error: { code: -32603, message: "the tools/call exchange was given up before the container's MCP server answered: the provider left" } });
    await until(() => server.cancelled.length === 1, "the server's cancellation");
    expect(server.cancelled[0]).toMatch(/^diverge-/);
  });
});

describe("a relayed call whose server answers oddly", () => {
  /** An MCP server of the SDK behind a front that answers the next tools/call itself with `answer`. */
  async function odd(answer: (response: http.ServerResponse, id: unknown) => void): Promise<URL> {
    const server = await sdkServer(true);
    cleanups.push(() => server.close());
    const front = http.createServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks);
      const message = body.length > 0 ? (JSON.parse(body.toString("utf8")) as { method?: string; id?: unknown }) : undefined;
      if (message?.method === "tools/call") return answer(response, message.id);
      const forwarded = http.request(server.url, { method: request.method, headers: request.headers }, (answered) => {
        response.writeHead(answered.statusCode ?? 502, answered.headers);
        answered.pipe(response);
      });
      forwarded.end(body);
    });
    await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
    cleanups.push(async () => {
      front.closeAllConnections();
      await new Promise<void>((resolve) => front.close(() => resolve()));
    });
    return new URL(`http://127.0.0.1:${(front.address() as AddressInfo).port}/mcp`);
  }
  const call = { method: "tools/call", params: { name: "echo", arguments: { text: "x" } } } as const;

  it("an SSE stream closed before the answer with no event id: an error saying so, and the session kept", { timeout: 120_000 }, async () => {
    const url = await odd((response) => response.writeHead(200, { "content-type": "text/event-stream" }).end(": nothing\n\n"));
    const inward = await inwardTo(url);
    expect(await inward.exchange(call)).toEqual({ error: { code: -32603, message: "the container's MCP server closed the call's SSE stream before answering, with no event id to resume it from" } });
    expect(inward.sessionsMade).toBe(1);
  });

  it("an answer of another content type: the SDK transport's error", { timeout: 120_000 }, async () => {
    const url = await odd((response) => response.writeHead(200, { "content-type": "text/plain" }).end("hello"));
    const inward = await inwardTo(url);
    expect(await inward.exchange(call)).toMatchObject({ error: { code: -32603, message: expect.stringMatching(/Unexpected content type: text\/plain/) } });
  });

  it("an answer far larger than the message limit: not read past its bound, refused saying so, the session kept", { timeout: 120_000 }, async () => {
    let sse = false;
    const url = await odd((response, id) => {
      const huge = JSON.stringify({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: "y".repeat(200_000) }] } });
      if (sse) response.writeHead(200, { "content-type": "text/event-stream" }).end(`data: ${huge}\n\n`);
      else response.writeHead(200, { "content-type": "application/json" }).end(huge);
    });
    const inward = new InwardMcp(url, () => {}, 1000);
    cleanups.push(() => inward.close());
    const refused = { error: { code: -32603, message: "the container's answer is more than 67536 bytes, larger than the message limit of 1000" } };
    expect(await inward.exchange(call)).toEqual(refused);
    sse = true;
    expect(await inward.exchange(call)).toEqual(refused);
    expect(inward.sessionsMade).toBe(1);
  });

  it("a JSON body without the call's answer, and a JSON-RPC error: each said as it is", { timeout: 120_000 }, async () => {
    let next: "other" | "error" = "other";
    const url = await odd((response, id) => {
      const body = next === "other" ? { jsonrpc: "2.0", id: "someone-else", result: {} } : { jsonrpc: "2.0", id, error: { code: -32042, message: "custom", data: { why: 1 } } };
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
    const inward = await inwardTo(url);
    expect(await inward.exchange(call)).toEqual({ error: { code: -32603, message: "the container's MCP server answered the call's POST without its answer" } });
    next = "error";
    expect(await inward.exchange(call)).toEqual({ error: { code: -32042, message: "custom", data: { why: 1 } } });
  });
});
