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
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, openContainer, PathsTools, type ProviderHandlers } from "../src/index.js";
import { rawMultiplexedProvider, rawPathsProvider, type RawProvider } from "./parity-peers.js";

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
  await connection.whenConnected({ timeoutMs: 10_000 });
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
      it(`${row.outcome} — ${transport}`, { timeout: 30_000 }, async () => {
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
    it(`outward MCP: not served, the connection goes on — ${transport}`, { timeout: 30_000 }, async () => {
      const proxy = await proxyFor(await container(), LIMIT);
      const provider = await provide(proxy, transport, { mcpCallTool: ({ params }) => ({ variant: "Result", result: text(params.name === "big" ? "x".repeat(200_000) : "small") }) }, LIMIT);
      const agent = await program(proxy);
      expect(await programOutcome(() => agent.callTool({ name: "big", arguments: {} }))).toMatchObject({ error: { code: -32603, data: { diverge: "NotServed" } } });
      expect(provider.said).toEqual([expect.stringMatching(/^the answer is \d+ bytes, larger than the proxy's message limit of 65536$/)]);
      expect(provider.connected()).toBe(true);
      expect(await programOutcome(() => agent.callTool({ name: "small", arguments: {} }))).toEqual({ result: text("small") });
    });
    it(`vault: 503 not served, the connection goes on — ${transport}`, { timeout: 30_000 }, async () => {
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
    it(`a provider that does not know the limit: the program still gets an MCP error, never a hang — ${transport}`, { timeout: 30_000 }, async () => {
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
    it(`the program is never left waiting — ${transport}`, { timeout: 30_000 }, async () => {
      const proxy = await proxyFor(await container());
      const hang: ProviderHandlers = { mcpCallTool: () => new Promise(() => {}) };
      let drop: () => Promise<unknown>;
      if (transport === "multiplexed") {
        const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`, { handlers: hang });
        await connection.beginTools({ arguments: { greeting: "Hello" } });
        drop = () => connection.close();
      } else {
        const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, hang);
        await connection.whenConnected({ timeoutMs: 10_000 });
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
      it(`${row.outcome} — ${transport}`, { timeout: 30_000 }, async () => {
        const proxy = await proxyFor(await container());
        const provider = await rawProvider(proxy, transport);
        const agent = await program(proxy);
        const outcome = programOutcome(() => agent.callTool({ name: "t", arguments: {} }));
        await (await provider.next(CALL_TOOL[transport])).answer([row.answer]);
        const result = (await outcome) as { error: { code: number; message: string; data: unknown } };
        expect(result.error.code).toBe(-32603);
        expect(result.error.data).toEqual({ diverge: "UnreadableAnswer" });
        const prefix = "MCP error -32603: the provider's answer could not be read: ";
        expect(result.error.message.startsWith(prefix)).toBe(true);
        const reason = result.error.message.slice(prefix.length);
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
      it(`${row.outcome} — ${transport}`, { timeout: 30_000 }, async () => {
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
      it(`a malformed answer (${row.outcome}) — ${transport}`, { timeout: 30_000 }, async () => {
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
    it(`the connection lost mid-exchange: 503, never asked again — ${transport}`, { timeout: 30_000 }, async () => {
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
      it(`${row.outcome} — ${transport}`, { timeout: 30_000 }, async () => {
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

describe("one inward MCP client for both transports", () => {
  it("the begin scope's channels and /tool/* share the proxy's one session with the container's server", { timeout: 30_000 }, async () => {
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
