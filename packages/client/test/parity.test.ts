// Both transports at parity (issue 16 §6): each exchange family the spec defines on both transports
// is run on each, and the program and the provider see the same outcome. The table is the test:
// a row per family and outcome, a column per transport. Real proxy, real sockets, real MCP servers.
//   inward MCP:  begin-scope channels 3-7 (ContainerMcp)  vs  /tool/* (PathsTools)
//   outward MCP: proxy-opened channels 7-11               vs  /requests kinds 0-4
//   vault:       proxy-opened channels 2-6                vs  /requests kinds 5-9
//   postgres:    the begin-scope pair (tag 0)                vs  /requests kind 11 and /postgres/{channel}
// The malformed answers are sent by a raw `ws` peer acting as the provider (parity-peers.ts); the
// container's server that refuses or drops a call is a real MCP SDK server behind a fault-injecting
// HTTP layer (parity-container.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, openContainer, PathsTools, pipePostgres, postgresOverPaths, type ProviderHandlers } from "../src/index.js";
import { startThrowawayPostgres, type ThrowawayPostgres } from "./multiplexed-postgres-server.js";
import { WebSocket } from "ws";
import { rawMultiplexedProvider, rawPathsProvider, type RawProvider } from "./parity-peers.js";
import { startFaultyContainer, type Fault, type FaultyContainer } from "./parity-container.js";

type Transport = "multiplexed" | "paths";
const TRANSPORTS: readonly Transport[] = ["multiplexed", "paths"];

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function container(): Promise<ExampleContainer> {
  const app = await startExampleContainer();
  cleanups.push(() => app.close());
  return app;
}

async function proxyFor(app: ExampleContainer, maxMessageBytes?: number): Promise<RunningProxy> {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {}, ...(maxMessageBytes ? { maxMessageBytes } : {}) });
  cleanups.push(() => proxy.close());
  return proxy;
}

/** The provider on `transport`, answering with `handlers`: begun on / (multiplexed), or holding /requests (paths). */
async function provide(proxy: RunningProxy, transport: Transport, handlers: ProviderHandlers, maxMessageBytes?: number): Promise<{ connected: () => boolean; said: string[] }> {
  // What the provider said about answers it did not send.
  const said: string[] = [];
  if (transport === "multiplexed") {
    let ended = false;
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`, {
      handlers,
      maxMessageBytes,
      onEvent: (event) => {
        if (event.type === "ended") ended = true;
        if (event.type === "answerNotSent") said.push(event.reason);
      },
    });
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hello" } });
    return { connected: () => !ended, said };
  }
  const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, handlers, {
    maxMessageBytes,
    onEvent: (event) => {
      if (event.type === "error" && event.error.detail.variant === "AnswerUnwritable") said.push(event.error.detail.reason);
    },
  });
  cleanups.push(() => connection.close());
  await connection.whenConnected({ timeoutMs: 60_000 });
  return { connected: () => connection.connected, said };
}

/** What the program saw: the result, or its MCP error's code and Diverge reason. */
async function programOutcome(call: () => Promise<unknown>): Promise<unknown> {
  try {
    return { result: await call() };
  } catch (problem) {
    const error = problem as { code?: number; message?: string; data?: unknown };
    return { error: { code: error.code, message: error.message?.replace(/ on channel \d+/, ""), data: error.data } };
  }
}

async function program(proxy: RunningProxy): Promise<Client> {
  const client = new Client({ name: "program", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`)));
  cleanups.push(() => client.close());
  return client;
}

const text = (value: string) => ({ content: [{ type: "text" as const, text: value }] });

describe("outward MCP: the program's exchange, answered by the provider on either transport", () => {
  const rows: { outcome: string; handlers: ProviderHandlers; maxMessageBytes?: number; expected: (seen: unknown) => void }[] = [
    {
      outcome: "a result",
      handlers: { mcpCallTool: ({ params }) => ({ variant: "Result", result: text(`answered ${params.name}`) }) },
      expected: (seen) => expect(seen).toEqual({ result: text("answered t") }),
    },
    {
      outcome: "an MCP error (passed through: code, message, data)",
      handlers: { mcpCallTool: () => ({ variant: "Error", error: { code: -32001, message: "the provider says no", data: { why: "policy" } } }) },
      expected: (seen) => expect(seen).toEqual({ error: { code: -32001, message: "MCP error -32001: the provider says no", data: { why: "policy" } } }),
    },
    {
      outcome: "not served (no answer before the end)",
      handlers: { mcpCallTool: () => undefined },
      expected: (seen) => expect(seen).toMatchObject({ error: { code: -32603, data: { diverge: "NotServed" } } }),
    },
  ];
  for (const row of rows) {
    for (const transport of TRANSPORTS) {
      it(`${row.outcome} — ${transport}`, { timeout: 120_000 }, async () => {
        const proxy = await proxyFor(await container(), row.maxMessageBytes);
        await provide(proxy, transport, row.handlers);
        const agent = await program(proxy);
        row.expected(await programOutcome(() => agent.callTool({ name: "t", arguments: {} })));
      });
    }
  }
});

describe("an oversized answer (larger than the proxy's message limit) on either transport", () => {
  // The provider that knows the proxy's limit does not send it (on / the proxy would end the one
  // connection on such a frame, close 1009): the exchange is not served, the provider says why, and
  // its connection goes on. Same outcome on both transports.
  const LIMIT = 64 * 1024;
  for (const transport of TRANSPORTS) {
    it(`outward MCP: not served, the connection goes on — ${transport}`, { timeout: 120_000 }, async () => {
      const proxy = await proxyFor(await container(), LIMIT);
      const provider = await provide(proxy, transport, { mcpCallTool: ({ params }) => ({ variant: "Result", result: text(params.name === "big" ? "x".repeat(200_000) : "small") }) }, LIMIT);
      const agent = await program(proxy);
      expect(await programOutcome(() => agent.callTool({ name: "big", arguments: {} }))).toMatchObject({ error: { code: -32603, data: { diverge: "NotServed" } } });
      expect(provider.said).toEqual([expect.stringMatching(/^the answer is \d+ bytes, larger than the proxy's message limit of 65536$/)]);
      expect(provider.connected()).toBe(true);
      expect(await programOutcome(() => agent.callTool({ name: "small", arguments: {} }))).toEqual({ result: text("small") });
    });
    it(`vault: 503 not served, the connection goes on — ${transport}`, { timeout: 120_000 }, async () => {
      const proxy = await proxyFor(await container(), LIMIT);
      const provider = await provide(proxy, transport, { vaultGet: ({ key }) => ({ variant: "Present", value: new Uint8Array(key === "big" ? 200_000 : 3) }) }, LIMIT);
      const big = await fetch(`http://127.0.0.1:${proxy.programPort}/vault/big`);
      expect([big.status, await big.text()]).toEqual([503, "the provider did not serve the ask\n"]);
      expect(provider.said).toHaveLength(1);
      expect(provider.connected()).toBe(true);
      const small = await fetch(`http://127.0.0.1:${proxy.programPort}/vault/small`);
      expect([small.status, (await small.arrayBuffer()).byteLength]).toEqual([200, 3]);
    });
  }
  for (const transport of TRANSPORTS) {
    it(`a provider that does not know the limit: the program still gets an MCP error, never a hang — ${transport}`, { timeout: 120_000 }, async () => {
      // On paths the proxy closes that one answer path (1009: AnswerTooLarge); on / the proxy ends the
      // one connection (Lost). The program's outcome is an MCP error on both.
      const proxy = await proxyFor(await container(), LIMIT);
      await provide(proxy, transport, { mcpCallTool: () => ({ variant: "Result", result: text("x".repeat(200_000)) }) });
      const agent = await program(proxy);
      expect(await programOutcome(() => agent.callTool({ name: "t", arguments: {} }))).toMatchObject({
        error: { code: -32603, data: { diverge: transport === "paths" ? "AnswerTooLarge" : "Lost" } },
      });
    });
  }
});

describe("outward MCP: the provider's connection lost mid-exchange", () => {
  // Each transport keeps its own fate rule (the shared README, §F): a begin-scope channel is never
  // asked again, so the program gets an MCP error; an unanswered `/requests` ask is asked again on
  // the next connection, so the program gets the next provider's answer. Neither hangs.
  for (const transport of TRANSPORTS) {
    it(`the program is never left waiting — ${transport}`, { timeout: 120_000 }, async () => {
      const proxy = await proxyFor(await container());
      const hang: ProviderHandlers = { mcpCallTool: () => new Promise(() => {}) };
      let drop: () => Promise<unknown>;
      if (transport === "multiplexed") {
        const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`, { handlers: hang });
        await connection.beginTools({ arguments: { greeting: "Hello" } });
        drop = () => connection.close();
      } else {
        const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, hang);
        await connection.whenConnected({ timeoutMs: 60_000 });
        drop = () => connection.close();
      }
      const agent = await program(proxy);
      const seen = programOutcome(() => agent.callTool({ name: "t", arguments: {} }));
      await new Promise((resolve) => setTimeout(resolve, 300));
      await drop();
      if (transport === "multiplexed") {
        expect(await seen).toMatchObject({ error: { code: -32603, data: { diverge: "Lost" } } });
      } else {
        // Asked again on the next /requests connection, and answered there.
        await provide(proxy, "paths", { mcpCallTool: () => ({ variant: "Result", result: text("asked again") }) });
        expect(await seen).toEqual({ result: text("asked again") });
      }
    });
  }
});

/** A raw provider on `transport`: begun on / (multiplexed) or holding /requests (paths). */
async function rawProvider(proxy: RunningProxy, transport: Transport): Promise<RawProvider> {
  const provider = transport === "multiplexed" ? await rawMultiplexedProvider(proxy.port) : await rawPathsProvider(proxy.port);
  cleanups.push(() => provider.close());
  return provider;
}

/** The exchange's tag on each transport: the begin-scope channel tag, or the `/requests` kind. */
const CALL_TOOL: Record<Transport, number> = { multiplexed: 9, paths: 2 };
const VAULT_GET: Record<Transport, number> = { multiplexed: 2, paths: 5 };

const bytes = (...parts: (number | string)[]) => {
  const out: number[] = [];
  for (const part of parts) out.push(...(typeof part === "number" ? [part] : new TextEncoder().encode(part)));
  return new Uint8Array(out);
};

/** No ask with `tag` arrives within `ms`: the exchange is not asked again. */
async function notAskedAgain(provider: RawProvider, tag: number, ms = 400): Promise<void> {
  const before = provider.asks.filter((ask) => ask.tag === tag).length;
  await new Promise((resolve) => setTimeout(resolve, ms));
  expect(provider.asks.filter((ask) => ask.tag === tag).length).toBe(before);
}

describe("outward MCP: a malformed answer, sent by a raw provider on either transport", () => {
  // Not asked again on either (the same provider would send the same bytes); the program gets an MCP
  // error quoting the decoder's exact text; the provider's connection goes on and carries the next
  // exchange.
  const rows: { outcome: string; answer: Uint8Array; reason: string | RegExp }[] = [
    { outcome: "an empty message", answer: bytes(), reason: "mcp answer frame is empty" },
    { outcome: "an unknown tag", answer: bytes(7, "{}"), reason: "unknown mcp answer frame tag 7" },
    { outcome: "JSON that does not parse", answer: bytes(0, "{not json"), reason: /^mcp answer did not parse: / },
    { outcome: "JSON of the wrong type", answer: bytes(0, '{"content":"not a list"}'), reason: /^mcp answer did not parse: / },
    { outcome: "an error that is not ErrorData", answer: bytes(1, '{"code":"x"}'), reason: /^mcp answer did not parse: / },
  ];
  for (const row of rows) {
    const seen: Partial<Record<Transport, unknown>> = {};
    for (const transport of TRANSPORTS) {
      it(`${row.outcome} — ${transport}`, { timeout: 120_000 }, async () => {
        const proxy = await proxyFor(await container());
        const provider = await rawProvider(proxy, transport);
        const agent = await program(proxy);
        const outcome = programOutcome(() => agent.callTool({ name: "t", arguments: {} }));
        await (await provider.next(CALL_TOOL[transport])).answer([row.answer]);
        const result = (await outcome) as { error: { code: number; message: string; data: unknown } };
        expect(result.error.code).toBe(-32603);
        expect(result.error.data).toEqual({ diverge: "UnreadableAnswer" });
        // The exchange is named first (issue 26: "not served" and its kin say which exchange).
        const prefix = /^MCP error -32603: tools\/call: the provider's answer (\(channel \d+\) )?could not be read: /;
        expect(result.error.message).toMatch(prefix);
        const reason = result.error.message.replace(prefix, "");
        if (typeof row.reason === "string") expect(reason).toBe(row.reason);
        else expect(reason).toMatch(row.reason);
        // The provider: not asked again, its connection goes on and carries the next exchange.
        await notAskedAgain(provider, CALL_TOOL[transport]);
        expect(provider.open).toBe(true);
        const next = programOutcome(() => agent.callTool({ name: "u", arguments: {} }));
        await (await provider.next(CALL_TOOL[transport])).answer([bytes(0, JSON.stringify(text("fine")))]);
        expect(await next).toEqual({ result: text("fine") });
        seen[transport] = result;
        if (transport === "paths" && seen.multiplexed !== undefined) expect(seen.paths).toEqual(seen.multiplexed);
      });
    }
  }
});

describe("vault: the program's HTTP call, answered by the provider on either transport", () => {
  const rows: { outcome: string; handlers: ProviderHandlers; status: number; body?: string }[] = [
    { outcome: "a result", handlers: { vaultGet: () => ({ variant: "Present", value: new TextEncoder().encode("secret") }) }, status: 200, body: "secret" },
    { outcome: "the provider's error", handlers: { vaultGet: () => ({ variant: "Error", message: "the store is down" }) }, status: 502, body: "the store is down" },
    { outcome: "not served", handlers: {}, status: 503 },
  ];
  for (const row of rows) {
    for (const transport of TRANSPORTS) {
      it(`${row.outcome} — ${transport}`, { timeout: 120_000 }, async () => {
        const proxy = await proxyFor(await container());
        await provide(proxy, transport, row.handlers);
        const response = await fetch(`http://127.0.0.1:${proxy.programPort}/vault/k`);
        expect(response.status).toBe(row.status);
        const body = await response.text();
        if (row.body !== undefined) expect(body).toContain(row.body);
      });
    }
  }
});

describe("vault: malformed, lost and oversized answers on either transport", () => {
  const fetchVault = async (proxy: RunningProxy) => {
    const response = await fetch(`http://127.0.0.1:${proxy.programPort}/vault/k`);
    return { status: response.status, body: await response.text() };
  };
  const malformed: { outcome: string; answer: Uint8Array; reason: string }[] = [
    { outcome: "an empty message", answer: bytes(), reason: "vault response is empty" },
    { outcome: "an unknown kind", answer: bytes(9), reason: "unknown vault response kind 9" },
    { outcome: "an error message that is not UTF-8", answer: bytes(2, 0xff, 0xfe), reason: "vault error message is not utf-8" },
  ];
  for (const row of malformed) {
    for (const transport of TRANSPORTS) {
      it(`a malformed answer (${row.outcome}) — ${transport}`, { timeout: 120_000 }, async () => {
        const proxy = await proxyFor(await container());
        const provider = await rawProvider(proxy, transport);
        const seen = fetchVault(proxy);
        await (await provider.next(VAULT_GET[transport])).answer([row.answer]);
        expect(await seen).toEqual({ status: 502, body: `the provider's answer could not be read: ${row.reason}\n` });
        // The provider: not asked again, and its connection carries the next call.
        await notAskedAgain(provider, VAULT_GET[transport]);
        expect(provider.open).toBe(true);
        const next = fetchVault(proxy);
        await (await provider.next(VAULT_GET[transport])).answer([bytes(0, "v")]);
        expect(await next).toEqual({ status: 200, body: "v" });
      });
    }
  }
  for (const transport of TRANSPORTS) {
    it(`the connection lost mid-exchange: 503, never asked again — ${transport}`, { timeout: 120_000 }, async () => {
      const proxy = await proxyFor(await container());
      const provider = await rawProvider(proxy, transport);
      const seen = fetchVault(proxy);
      // Multiplexed: the provider's one connection ends with the channel open. Paths: the answer
      // path ends abruptly after its message (an answer is a message and a clean close).
      await (await provider.next(VAULT_GET[transport])).answer([bytes(0, "half")], "abrupt");
      expect(await seen).toEqual({ status: 503, body: "the exchange was lost; it is not asked again\n" });
      // A provider that comes next (on /requests: / is once per proxy life) is not asked it again.
      const next = transport === "paths" ? provider : await rawProvider(proxy, "paths");
      await notAskedAgain(next, VAULT_GET.paths);
    });
  }
});

describe("inward MCP: the provider's exchange with the container's server on either transport", () => {
  /** The container's server as the provider reaches it on `transport`. */
  async function reach(proxy: RunningProxy, transport: Transport) {
    if (transport === "paths") return new PathsTools(`ws://127.0.0.1:${proxy.port}`);
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`);
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hello" } });
    return connection.mcp;
  }
  const outcome = async (call: () => Promise<unknown>) => {
    try {
      return { result: await call() };
    } catch (problem) {
      const detail = (problem as { detail: { variant: string; error?: { code: number; message: string } } }).detail;
      return { variant: detail.variant, code: detail.error?.code, message: detail.error?.message };
    }
  };
  const rows: { outcome: string; maxMessageBytes?: number; call: (tools: Awaited<ReturnType<typeof reach>>) => Promise<unknown>; expected: (seen: unknown) => void }[] = [
    { outcome: "a result", call: (tools) => tools.callTool({ name: "greet", arguments: { name: "Ada" } }), expected: (seen) => expect(seen).toEqual({ result: text("Hello, Ada!") }) },
    {
      outcome: "the server's MCP error, verbatim",
      call: (tools) => tools.readResource({ uri: "example://none" }),
      expected: (seen) => expect(seen).toMatchObject({ variant: "Mcp", code: expect.any(Number) }),
    },
    {
      outcome: "an oversized answer (replaced by -32603 saying so)",
      maxMessageBytes: 600,
      call: (tools) => tools.listTools(),
      expected: (seen) => expect(seen).toMatchObject({ variant: "Mcp", code: -32603, message: expect.stringContaining("larger than the message limit") }),
    },
  ];
  for (const row of rows) {
    const seen: Partial<Record<Transport, unknown>> = {};
    for (const transport of TRANSPORTS) {
      it(`${row.outcome} — ${transport}`, { timeout: 120_000 }, async () => {
        const proxy = await proxyFor(await container(), row.maxMessageBytes);
        const tools = await reach(proxy, transport);
        seen[transport] = await outcome(() => row.call(tools));
        row.expected(seen[transport]);
        // The same outcome on both: the second transport's run compares with the first's.
        if (transport === "paths" && seen.multiplexed !== undefined) expect(seen.paths).toEqual(seen.multiplexed);
      });
    }
  }
});

describe("inward MCP: the container's server fails, the same on either transport", () => {
  async function faulty(): Promise<{ front: FaultyContainer; proxy: RunningProxy }> {
    const front = await startFaultyContainer();
    cleanups.push(() => front.close());
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: front.port, root: exampleRoot, secretsGate: false, log: () => {} });
    cleanups.push(() => proxy.close());
    return { front, proxy };
  }
  async function reach(proxy: RunningProxy, transport: Transport) {
    if (transport === "paths") return new PathsTools(`ws://127.0.0.1:${proxy.port}`);
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`);
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hello" } });
    return connection.mcp;
  }
  const outcome = async (call: () => Promise<unknown>) => {
    try {
      return { result: await call() };
    } catch (problem) {
      const detail = (problem as { detail: { variant: string; error?: { code: number; message: string } } }).detail;
      return { variant: detail.variant, code: detail.error?.code, message: detail.error?.message };
    }
  };
  const rows: { outcome: string; fault: Fault; reached: number; message: RegExp }[] = [
    { outcome: "not served (the server refuses the call: HTTP 503)", fault: "refuse", reached: 0, message: /Error POSTing to endpoint: the server is not taking calls now/ },
    { outcome: "the connection lost mid-exchange (the server acted; its answer never came): not asked again", fault: "drop", reached: 1, message: /^the connection to the container's MCP server was lost before it answered/ },
    { outcome: "a malformed answer (a result not of the method's type)", fault: "malformedResult", reached: 1, message: /^the container's MCP server answered with a result not of its type \(content: / },
    { outcome: "a malformed answer (a body that is not JSON)", fault: "notJson", reached: 1, message: /^the container's MCP server's answer could not be read: / },
  ];
  for (const row of rows) {
    const seen: Partial<Record<Transport, unknown>> = {};
    for (const transport of TRANSPORTS) {
      it(`${row.outcome} — ${transport}`, { timeout: 120_000 }, async () => {
        const { front, proxy } = await faulty();
        const tools = await reach(proxy, transport);
        expect(await outcome(() => tools.listTools())).toMatchObject({ result: { tools: expect.any(Array) } });
        front.arm("tools/call", row.fault);
        const failed = (await outcome(() => tools.callTool({ name: "greet", arguments: { name: "Ada" } }))) as { variant: string; code: number; message: string };
        // The provider gets the container's failure as an MCP internal error with the reason; the call reached the server at most once.
        expect(failed).toMatchObject({ variant: "Mcp", code: -32603 });
        expect(failed.message).toMatch(row.message);
        expect(front.reached("tools/call")).toBe(row.reached);
        // The next exchange goes through (the proxy's client is dialled again if its transport died).
        expect(await outcome(() => tools.callTool({ name: "greet", arguments: { name: "Bo" } }))).toEqual({ result: text("Hello, Bo!") });
        expect(front.reached("tools/call")).toBe(row.reached + 1);
        seen[transport] = failed;
        if (transport === "paths" && seen.multiplexed !== undefined) expect(seen.paths).toEqual(seen.multiplexed);
      });
    }
  }
});

describe("inward MCP: params that do not parse, sent by a raw provider", () => {
  // Each transport's own rule: a begin-scope channel request that does not decode is answered by a
  // bare finish and nothing else (seed 004); /tool/* answers every exchange, here with -32602. On
  // both the container's server is never asked and the provider's connection goes on.
  const malformed: { outcome: string; params: string }[] = [
    { outcome: "JSON that does not parse", params: "{not json" },
    { outcome: "JSON of the wrong type", params: '{"name":7}' },
  ];
  for (const row of malformed) {
    it(`${row.outcome} — multiplexed: a bare finish`, { timeout: 120_000 }, async () => {
      const app = await container();
      const proxy = await proxyFor(app);
      const provider = await rawMultiplexedProvider(proxy.port);
      cleanups.push(() => provider.close());
      expect(await provider.request(bytes(5, row.params))).toEqual([]);
      expect(app.calls.filter((call) => call.startsWith("tools/call"))).toEqual([]);
      expect(provider.open).toBe(true);
      const fine = await provider.request(bytes(5, JSON.stringify({ name: "greet", arguments: { name: "Ada" } })));
      expect(fine.map((payload) => [payload[0], JSON.parse(new TextDecoder().decode(payload.subarray(1)))])).toEqual([[0, text("Hello, Ada!")]]);
    });
    it(`${row.outcome} — paths: one -32602 answer, then the close`, { timeout: 120_000 }, async () => {
      const app = await container();
      const proxy = await proxyFor(app);
      const socket = new WebSocket(`ws://127.0.0.1:${proxy.port}/tool/call-tool`);
      const messages: Buffer[] = [];
      socket.on("message", (data: Buffer) => messages.push(data));
      const closed = new Promise<number>((resolve) => socket.once("close", (code) => resolve(code)));
      await new Promise((resolve) => socket.once("open", resolve));
      socket.send(bytes(...[...new TextEncoder().encode(row.params)]));
      expect(await closed).toBe(1000);
      expect(messages).toHaveLength(1);
      expect(messages[0]![0]).toBe(1);
      expect(JSON.parse(messages[0]!.subarray(1).toString("utf8"))).toMatchObject({ code: -32602 });
      expect(app.calls.filter((call) => call.startsWith("tools/call"))).toEqual([]);
      expect(await new PathsTools(`ws://127.0.0.1:${proxy.port}`).callTool({ name: "greet", arguments: { name: "Ada" } })).toEqual(text("Hello, Ada!"));
    });
  }
});

describe("postgres: the program's database connection, carried by the provider on either transport", () => {
  // The begin-scope pair (tag 0) against /requests kind 11 with /postgres/{channel}, to a real
  // PostgreSQL. Raw pgwire both ways, read by neither party: there is no MCP error and no answer to
  // be malformed, so those rows are not meaningful for this family; an answer is never oversized
  // either, since the database's bytes go as the chunks it wrote, each far below the limit.
  let database: ThrowawayPostgres;
  beforeAll(async () => {
    database = await startThrowawayPostgres();
  }, 120_000);
  afterAll(async () => {
    await database?.stop();
  });

  /** The provider on `transport`, piping to `target` (or declining every connection); returns how to drop it. */
  async function carry(proxy: RunningProxy, transport: Transport, target: string | undefined): Promise<() => Promise<unknown>> {
    if (transport === "multiplexed") {
      const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`, target ? { onPostgres: (announced) => pipePostgres(announced, target) } : {});
      cleanups.push(() => connection.close());
      await connection.beginTools({ arguments: { greeting: "Hello" } });
      return () => connection.close();
    }
    const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, target ? { raw: postgresOverPaths(target) } : {});
    cleanups.push(() => connection.close());
    await connection.whenConnected({ timeoutMs: 60_000 });
    return () => connection.close();
  }
  function driver(proxy: RunningProxy): pg.Client {
    const client = new pg.Client({ host: "127.0.0.1", port: proxy.multiplexed.pgPort, user: "postgres", database: "postgres", connectionTimeoutMillis: 60_000 });
    client.on("error", () => {});
    cleanups.push(() => client.end());
    return client;
  }
  const failure = async (call: () => Promise<unknown>) => {
    try {
      await call();
      return "succeeded";
    } catch (problem) {
      return (problem as Error).message;
    }
  };

  for (const transport of TRANSPORTS) {
    it(`a result, a result larger than the message limit whole, several connections at once — ${transport}`, { timeout: 120_000 }, async () => {
      const proxy = await proxyFor(await container(), 256 * 1024);
      await carry(proxy, transport, database.url);
      const clients = [driver(proxy), driver(proxy)];
      await Promise.all(clients.map((client) => client.connect()));
      const rows = await Promise.all(clients.map((client, i) => client.query("select $1::int * 2 as doubled", [i + 1])));
      expect(rows.map((result) => result.rows[0].doubled)).toEqual([2, 4]);
      const big = await clients[0]!.query("select repeat('x', 2000000) as blob");
      expect(big.rows[0].blob).toHaveLength(2_000_000);
    });

    it(`not served (the provider declines the connection): the driver sees the server hang up — ${transport}`, { timeout: 120_000 }, async () => {
      const proxy = await proxyFor(await container());
      await carry(proxy, transport, undefined);
      expect(await failure(() => driver(proxy).connect())).toMatch(/Connection terminated unexpectedly|server closed the connection/);
    });

    it(`the provider's connection lost mid-query: the driver's connection ends, and it is not carried again — ${transport}`, { timeout: 120_000 }, async () => {
      const proxy = await proxyFor(await container());
      const drop = await carry(proxy, transport, database.url);
      const client = driver(proxy);
      await client.connect();
      const query = failure(() => client.query("select pg_sleep(30)"));
      await new Promise((resolve) => setTimeout(resolve, 300));
      await drop();
      expect(await query).toMatch(/Connection terminated/);
      // A new provider (on /requests: / is once per proxy life) is not asked for the lost connection.
      const asked: string[] = [];
      const next = connectProxy(`ws://127.0.0.1:${proxy.port}`, {}, { onEvent: (event) => event.type === "ask" && asked.push(event.ask.variant) });
      cleanups.push(() => next.close());
      await next.whenConnected({ timeoutMs: 60_000 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(asked).toEqual([]);
    });
  }
});

describe("one inward MCP client for both transports", () => {
  it("the begin scope's channels and /tool/* share the proxy's one session with the container's server", { timeout: 120_000 }, async () => {
    const proxy = await proxyFor(await container());
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`);
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hello" } });
    const onScope = await connection.mcp.listTools();
    const onPaths = await new PathsTools(`ws://127.0.0.1:${proxy.port}`).listTools();
    expect(onPaths).toEqual(onScope);
    expect(proxy.inward.sessionsMade).toBe(1);
  });
});
