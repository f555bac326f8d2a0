// Bad peers over real sockets: slow readers, half-open sockets, floods of malformed frames, channel
// numbers at the ends of their range, channel requests naming closed or foreign channels, answers on
// paths for asks never made, `__proto__`/`constructor` keys carried as data, JSON nested 100k deep,
// invalid UTF-8. None crashes the process, none blocks an exchange running beside it, and memory
// returns to near its baseline once they are gone.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decodeMcpCallToolAnswer,
  decodeMcpListToolsAnswer,
  decodeToolsBeginResponse,
  encodeContainerProxyRequest,
  encodeMcpCallToolAnswer,
  encodeMcpListToolsAnswer,
  encodeToolsBeginChannelRequest,
  type ServerFrame,
  type ToolsBeginChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { McpExchangeError, startProxy, type RunningProxy } from "../src/index.js";
import { onChannel, onScope, rawConnect, type RawConnection } from "./multiplexed-support.js";
import { answerPath, closed, cutPath, openWs, pathOf, rawUpgradeStatus, rejection, RequestsLine } from "./paths-helpers.js";
import { MiB, rawUpgrade, settledMemory, startTestProgram, waitUntil, wsFrame, type TestProgram } from "./hostile-support.js";

let program: TestProgram;
let proxy: RunningProxy;
/** A proxy no provider has begun on: its outward MCP goes on /requests (once begun, the begin scope carries it). */
let pathsProxy: RunningProxy;
let raw: RawConnection;
let requests: RequestsLine;
let baseline = 0;
let uncaught: unknown[] = [];
const onUncaught = (error: unknown) => uncaught.push(error);

const BEGIN = encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: {} } });
const text = (value: string) => new TextEncoder().encode(value);
const concat = (...parts: Uint8Array[]) => Buffer.concat(parts.map((part) => Buffer.from(part)));
const payloadOf = (frame: ServerFrame) => (frame as { payload: Uint8Array }).payload;

beforeAll(async () => {
  process.on("uncaughtException", onUncaught);
  process.on("unhandledRejection", onUncaught);
  program = await startTestProgram();
  // Spilling off: a pair that holds the connection paused with its program reading nothing ends after 1 s (default 10).
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, appPort: program.port, pairStallMs: 1000, maxPairSpillBytes: 0 });
  pathsProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, appPort: program.port });
  raw = await rawConnect(proxy.port);
  raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
  expect(decodeToolsBeginResponse(payloadOf(await raw.next(onScope(1)))).variant).toBe("Begun");
  requests = await RequestsLine.open(pathsProxy.port);
  // Warm both transports up before the baseline, so lazily made sessions and caches are in it.
  await exchangeOnBegin(1_000_000, { variant: "McpCallTool", params: { name: "echo", arguments: { value: "warm" } } });
  await exchangeOnPaths();
  baseline = await settledMemory();
});

afterAll(async () => {
  process.off("uncaughtException", onUncaught);
  process.off("unhandledRejection", onUncaught);
  raw?.socket.terminate();
  await requests?.close().catch(() => {});
  await proxy?.close();
  await pathsProxy?.close();
  await program?.close();
});

let nextChannel = 10;

/** One MCP exchange on the begin scope; resolves with its answer payload. */
async function exchangeOnBegin(channel: number, request: ToolsBeginChannelRequest): Promise<Uint8Array> {
  raw.send({ variant: "ChannelRequest", scope: 1, channel, payload: encodeToolsBeginChannelRequest(request) });
  const response = await raw.next(onChannel(1, channel), 15_000);
  expect(response.variant).toBe("ChannelResponse");
  expect((await raw.next(onChannel(1, channel), 15_000)).variant).toBe("ChannelResponseFinish");
  return payloadOf(response);
}

/** One exchange on the paths transport, answered properly. */
async function exchangeOnPaths(): Promise<void> {
  const result = pathsProxy.mcp.listTools();
  const ask = await requests.nextExchange();
  await answerPath(pathsProxy.port, pathOf(ask), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [{ name: "ok", inputSchema: { type: "object" } }] } }));
  expect((await result).tools[0]!.name).toBe("ok");
}

/** Both transports still answer, at once. */
async function othersStillServed(): Promise<void> {
  const channel = nextChannel++;
  const [answer] = await Promise.all([exchangeOnBegin(channel, { variant: "McpCallTool", params: { name: "echo", arguments: { value: channel } } }), exchangeOnPaths()]);
  expect(decodeMcpCallToolAnswer(answer, { check: checkMcp })).toMatchObject({ variant: "Result", result: { structuredContent: { echoed: channel } } });
}

describe("bad peers", () => {
  it("half-open sockets: one that upgrades an answer path and goes silent, one that sends half a frame; others are served meanwhile, and the exchange is asked again once they go", async () => {
    const pending = pathsProxy.mcp.callTool({ name: "half-open" });
    const ask = await requests.nextExchange();
    const silent = await rawUpgrade(pathsProxy.port, pathOf(ask));
    expect(silent.status).toBe(101);
    await othersStillServed();
    // The same exchange's path is taken (409); a second silent one on `/` gets 409 too (one connection).
    expect(await rawUpgradeStatus(pathsProxy.port, pathOf(ask))).toBe(409);
    const second = pathsProxy.mcp.callTool({ name: "half-frame" });
    const ask2 = await requests.nextExchange();
    const half = await rawUpgrade(pathsProxy.port, pathOf(ask2));
    const frame = wsFrame(2, encodeMcpCallToolAnswer({ variant: "Result", result: { content: [] } }));
    half.socket.write(frame.subarray(0, Math.floor(frame.length / 2)));
    // A socket that upgraded `/requests`-style and then stops reading while asks flow: a huge claimed length.
    const claimed = await rawUpgrade(pathsProxy.port, "/mcp/list-tools/4000000000");
    expect(claimed.status).toBe(404);
    claimed.socket.destroy();
    await othersStillServed();
    // They go away without a close: both exchanges are asked again and answered.
    silent.socket.destroy();
    half.socket.destroy();
    for (let i = 0; i < 2; i++) {
      const again = await requests.nextExchange();
      await answerPath(pathsProxy.port, pathOf(again), encodeMcpCallToolAnswer({ variant: "Result", result: { content: [{ type: "text", text: "again" }] } }));
    }
    expect(await pending).toMatchObject({ content: [{ text: "again" }] });
    expect(await second).toMatchObject({ content: [{ text: "again" }] });
  });

  it("a half-open socket on the program's /mcp (headers, then half a body) blocks nobody", async () => {
    const { connect } = await import("node:net");
    const socket = connect({ host: "127.0.0.1", port: proxy.programPort });
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.on("error", () => {});
    socket.write("POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":");
    await othersStillServed();
    socket.destroy();
  });

  it("a flood of thousands of malformed frames on / is disregarded, counted and bounded; the connection goes on", async () => {
    const connection = proxy.multiplexed.connection!;
    const before = connection.disregardedCount;
    const junk: Buffer[] = [];
    for (let i = 0; i < 5000; i++) {
      const kind = i % 5;
      if (kind === 0) junk.push(randomBytes(i % 9)); // shorter than the header
      else if (kind === 1) junk.push(concat(new Uint8Array([7 + (i % 249)]), randomBytes(8 + (i % 40)))); // no such type
      else if (kind === 2) junk.push(concat(new Uint8Array([2]), randomBytes(8))); // a server-only type
      else if (kind === 3) junk.push(concat(new Uint8Array([5, 0, 0, 0, 1]), randomBytes(4), randomBytes(i % 64))); // a response for a channel the proxy never opened
      else junk.push(concat(new Uint8Array([4, 0, 0, 0, 99]), randomBytes(4), randomBytes(16))); // a channel request on a scope not open
    }
    for (const frame of junk) raw.socket.send(frame);
    // Text, including invalid UTF-8, is ignored and never ends the connection.
    for (let i = 0; i < 200; i++) raw.socket.send(Buffer.from([0xff, 0xfe, 0xc3, 0x28, i]), { binary: false });
    await othersStillServed();
    expect(connection.disregardedCount - before).toBe(5000);
    expect(connection.disregarded.length).toBeLessThanOrEqual(1000);
    expect(connection.frames.closed).toBe(false);
  });

  it("a flood of malformed frames on answer paths ends each exchange once (unreadable), and asks for never-made answers are refused before the upgrade", async () => {
    const exchanges = Array.from({ length: 20 }, (_, i) => rejection(pathsProxy.mcp.callTool({ name: `flood${i}` })));
    for (let i = 0; i < 20; i++) {
      const ask = await requests.nextExchange();
      const socket = await openWs(pathsProxy.port, pathOf(ask));
      for (let k = 0; k < 200; k++) socket.send(k === 0 ? concat(new Uint8Array([0]), randomBytes(30)) : randomBytes(k % 50));
      socket.close();
      await closed(socket);
    }
    for (const error of await Promise.all(exchanges)) {
      expect(error).toBeInstanceOf(McpExchangeError);
      expect(error.variant).toBe("UnreadableAnswer");
    }
    // Answers on paths for asks never made: 404 before the upgrade, a thousand times over.
    const statuses = await Promise.all(Array.from({ length: 1000 }, (_, i) => rawUpgradeStatus(pathsProxy.port, `/mcp/call-tool/${3_000_000_000 + i}`)));
    expect(new Set(statuses)).toEqual(new Set([404]));
    expect(await rawUpgradeStatus(pathsProxy.port, "/mcp/call-tool/4294967296")).toBe(400);
    await othersStillServed();
  }, 120_000);

  it("channel numbers 0 and 2^32-1 on the begin scope are ordinary channels", async () => {
    for (const channel of [0, 0xffffffff]) {
      const answer = await exchangeOnBegin(channel, { variant: "McpListTools", params: null });
      expect(decodeMcpListToolsAnswer(answer, { check: checkMcp }).variant).toBe("Result");
    }
  });

  it("channel requests naming closed or foreign channels: halves for unknown ids get a bare finish, finishes for channels never opened are disregarded", async () => {
    const connection = proxy.multiplexed.connection!;
    // The provider's half of a postgres or daemon connection the proxy never announced (or already closed).
    for (const [channel, request] of [
      [20, { variant: "Postgres", connection_id: 0 }],
      [21, { variant: "Postgres", connection_id: 0xffffffff }],
      [22, { variant: "Daemon", connection_id: 12345 }],
    ] as const) {
      raw.send({ variant: "ChannelRequest", scope: 1, channel, payload: encodeToolsBeginChannelRequest(request) });
      expect((await raw.next(onChannel(1, channel))).variant).toBe("ChannelResponseFinish");
    }
    // Responses and finishes naming proxy channels that do not exist (or ended), and a scope never opened.
    const before = connection.disregardedCount;
    raw.send({ variant: "ChannelResponse", scope: 1, channel: 0xffffffff, payload: text("foreign") });
    raw.send({ variant: "ChannelResponseFinish", scope: 1, channel: 0 });
    raw.send({ variant: "ChannelRequest", scope: 0xffffffff, channel: 1, payload: encodeToolsBeginChannelRequest({ variant: "Info" }) });
    await waitUntil(() => connection.disregardedCount - before === 3, 60_000, "three disregards");
    // A channel request on a number the provider still has open is disregarded; the open one goes on.
    raw.send({ variant: "ChannelRequest", scope: 1, channel: 30, payload: encodeToolsBeginChannelRequest({ variant: "McpNotifications" }) });
    raw.send({ variant: "ChannelRequest", scope: 1, channel: 30, payload: encodeToolsBeginChannelRequest({ variant: "McpListTools", params: null }) });
    await waitUntil(() => connection.disregarded.at(-1)?.reason === "channel-open", 60_000, "the second request disregarded");
    expect(await raw.none(onChannel(1, 30), 200)).toBe(true);
    await othersStillServed();
  });

  it("__proto__ and constructor keys ride both transports as data and pollute nothing", async () => {
    const hostile = '{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},"nested":{"__proto__":{"isAdmin":true}}}';
    // Provider -> program on the begin scope: arguments with the keys, echoed back by the program.
    const channel = nextChannel++;
    const payload = concat(new Uint8Array([5]), text(`{"name":"echo","arguments":{"value":${hostile}}}`));
    raw.send({ variant: "ChannelRequest", scope: 1, channel, payload });
    const response = await raw.next(onChannel(1, channel), 15_000);
    const body = new TextDecoder().decode(payloadOf(response).subarray(1));
    expect(body).toContain('"__proto__":{"polluted":"yes"}');
    expect(body).toContain('"constructor":{"prototype":{"polluted":"yes"}}');
    // Program -> provider on the paths: params with the keys in the ask, and an answer with them.
    const result = pathsProxy.mcp.callTool(JSON.parse(`{"name":"p","arguments":${hostile}}`));
    const ask = await requests.nextExchange();
    expect(Object.hasOwn((ask as { params: { arguments: object } }).params.arguments, "__proto__")).toBe(true);
    await answerPath(pathsProxy.port, pathOf(ask), concat(new Uint8Array([0]), text(`{"content":[],"structuredContent":${hostile}}`)));
    const structured = (await result).structuredContent as Record<string, unknown>;
    expect(Object.hasOwn(structured, "__proto__")).toBe(true);
    expect(JSON.stringify(structured)).toBe(hostile);
    // Nothing anywhere in this process gained a property.
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty("polluted");
    expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain("polluted");
  });

  it("JSON nested 100k levels deep in params and answers: a typed failure or a bare finish, never a crash", async () => {
    const deep = "[".repeat(100_000) + "]".repeat(100_000);
    // Params on the begin scope (tag 5): unreadable -> bare finish.
    const channel = nextChannel++;
    raw.send({ variant: "ChannelRequest", scope: 1, channel, payload: concat(new Uint8Array([5]), text(`{"name":"echo","arguments":{"value":${deep}}}`)) });
    const first = await raw.next(onChannel(1, channel), 15_000);
    // Unreadable (a bare finish), or read and then not relayable (one [1] MCP error, then the finish).
    if (first.variant === "ChannelResponse") {
      expect(decodeMcpCallToolAnswer(payloadOf(first), { check: checkMcp }).variant).toBe("Error");
      expect((await raw.next(onChannel(1, channel), 15_000)).variant).toBe("ChannelResponseFinish");
    } else expect(first.variant).toBe("ChannelResponseFinish");
    // The begin's own arguments on a second scope: unreadable -> bare finish (or the one error of a second begin).
    raw.send({ variant: "Request", scope: 2, channel: 0, payload: concat(new Uint8Array([1]), text(`{"arguments":${deep}}`)) });
    await raw.next(onScope(2), 15_000);
    // An answer on an answer path: UnreadableAnswer, not a crash.
    // An answer on an answer path: a value, or UnreadableAnswer when checking it overflows the stack.
    const result = pathsProxy.mcp.callTool({ name: "deep" }).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    const ask = await requests.nextExchange();
    await answerPath(pathsProxy.port, pathOf(ask), concat(new Uint8Array([0]), text(`{"content":[],"structuredContent":{"a":${deep}}}`)));
    const outcome = await result;
    if ("error" in outcome) expect((outcome.error as McpExchangeError).variant).toBe("UnreadableAnswer");
    else expect(outcome.value.structuredContent).toHaveProperty("a");
    // The program answering 3000 deep on the begin scope (the SDK's own server cannot send 5000: it answers an empty stream): relayed
    // or an MCP error; relayed, the provider's codec refuses it as serde_json does (past its recursion limit), a typed error.
    const deepAnswer = await exchangeOnBegin(nextChannel++, { variant: "McpCallTool", params: { name: "deep", arguments: { depth: 3000 } } });
    let deepOutcome: string;
    try {
      deepOutcome = decodeMcpCallToolAnswer(deepAnswer, { check: checkMcp }).variant;
    } catch (error) {
      expect((error as Error).message).toMatch(/^mcp answer did not parse: recursion limit exceeded at line 1 column \d+$/);
      deepOutcome = "Unreadable";
    }
    expect(["Unreadable", "Error"]).toContain(deepOutcome);
    // Params that deep from the program on its /mcp: an error for the program, nothing else.
    const response = await fetch(`http://127.0.0.1:${proxy.programPort}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"d","version":"1"},"x":${deep}}}`,
    });
    await response.text();
    expect(response.status).toBeLessThan(600);
    await othersStillServed();
    expect(uncaught).toEqual([]);
  }, 120_000);

  it("JSON nested 100k and 1M deep against diverge-proxy as a process (plain node, where checking it overflows the stack): it answers and lives on", async () => {
    const { spawn } = await import("node:child_process");
    const { fileURLToPath } = await import("node:url");
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate", "--app-port", String(program.port)], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    try {
      const line = await new Promise<string>((resolve) => child.stdout.on("data", (chunk: Buffer) => resolve(chunk.toString())));
      const port = Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)![1]);
      const programPort = Number(/http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(line)![1]);
      const deep = "[".repeat(1_000_000) + "]".repeat(1_000_000);
      const conn = await rawConnect(port);
      conn.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
      expect(decodeToolsBeginResponse(payloadOf(await conn.next(onScope(1)))).variant).toBe("Begun");
      conn.send({ variant: "ChannelRequest", scope: 1, channel: 1, payload: concat(new Uint8Array([5]), text(`{"name":"echo","arguments":{"value":${deep}}}`)) });
      // Unreadable (a bare finish), or read and then not relayable to the program (one [1] -32603, then the finish).
      const first = await conn.next(onChannel(1, 1), 15_000);
      if (first.variant === "ChannelResponse") {
        expect(decodeMcpCallToolAnswer(payloadOf(first), { check: checkMcp })).toMatchObject({ variant: "Error", error: { code: -32603 } });
        expect((await conn.next(onChannel(1, 1), 15_000)).variant).toBe("ChannelResponseFinish");
      } else expect(first.variant).toBe("ChannelResponseFinish");
      conn.send({ variant: "Request", scope: 2, channel: 0, payload: concat(new Uint8Array([1]), text(`{"arguments":${deep}}`)) });
      // A second begin: one error and the finish (or a bare finish when it cannot be read).
      const scope2 = await conn.next(onScope(2), 15_000);
      if (scope2.variant === "Response") expect((await conn.next(onScope(2), 15_000)).variant).toBe("ResponseFinish");
      // The outward side: the program asks (on the begin scope, begun), the provider answers 100k deep; the program gets an error.
      const line2 = await RequestsLine.open(port);
      const client = new Client({ name: "program", version: "1" });
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${programPort}/mcp`)));
      const call = client.callTool({ name: "deep" }).catch((error: unknown) => error);
      const asked = await conn.next((frame) => frame.variant === "ChannelRequest" && payloadOf(frame)[0] === 9, 15_000);
      const proxyChannel = (asked as { channel: number }).channel;
      conn.send({ variant: "ChannelResponse", scope: 1, channel: proxyChannel, payload: concat(new Uint8Array([0]), text(`{"content":[],"structuredContent":{"a":${deep}}}`)) });
      conn.send({ variant: "ChannelResponseFinish", scope: 1, channel: proxyChannel });
      expect(await call).toMatchObject({ code: -32603, data: { diverge: expect.stringMatching(/^(UnreadableAnswer|Unwritable)$/) } });
      // Still alive: the begin scope answers an ordinary exchange.
      conn.send({ variant: "ChannelRequest", scope: 1, channel: 2, payload: encodeToolsBeginChannelRequest({ variant: "McpListTools", params: null }) });
      expect((await conn.next(onChannel(1, 2), 15_000)).variant).toBe("ChannelResponse");
      expect(child.exitCode).toBeNull();
      await client.close();
      await line2.close();
      conn.socket.terminate();
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    expect(stderr).not.toMatch(/RangeError|Maximum call stack/);
  }, 120_000);

  it("invalid UTF-8: in JSON on the begin scope, on answer paths and in text messages on every path", async () => {
    const bad = Buffer.from([0xc3, 0x28, 0xff, 0xfe, 0xed, 0xa0, 0x80]);
    const channel = nextChannel++;
    raw.send({ variant: "ChannelRequest", scope: 1, channel, payload: concat(new Uint8Array([5]), text('{"name":"'), bad, text('"}')) });
    expect((await raw.next(onChannel(1, channel))).variant).toBe("ChannelResponseFinish");
    const secrets = nextChannel++;
    raw.send({ variant: "ChannelRequest", scope: 1, channel: secrets, payload: concat(new Uint8Array([8]), text('{"K":"'), bad, text('"}')) });
    expect((await raw.next(onChannel(1, secrets))).variant).toBe("ChannelResponseFinish");
    const result = rejection(pathsProxy.mcp.callTool({ name: "utf8" }));
    const ask = await requests.nextExchange();
    const socket = await openWs(pathsProxy.port, pathOf(ask));
    socket.send(bad, { binary: false });
    socket.send(concat(new Uint8Array([0]), text('{"content":[{"type":"text","text":"'), bad, text('"}]}')));
    socket.close(1000);
    expect(await closed(socket)).toBe(1000);
    expect((await result).variant).toBe("UnreadableAnswer");
    // Text with invalid UTF-8 on /requests is ignored too; the connection stays.
    requests.socket.send(bad, { binary: false });
    await othersStillServed();
  });

  it("a slow reader on /requests: asks pile up in its socket, not in an unbounded queue; once it reads, every ask arrives", async () => {
    requests.socket.pause();
    const many = Array.from({ length: 2000 }, (_, i) => pathsProxy.mcp.callTool({ name: `slow${i}`, arguments: { pad: "q".repeat(512) } }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(pathsProxy.stats().pendingAsks).toBeGreaterThanOrEqual(2000);
    requests.socket.resume();
    for (let i = 0; i < 2000; i++) {
      const ask = await requests.nextExchange();
      await answerPath(pathsProxy.port, pathOf(ask), encodeMcpCallToolAnswer({ variant: "Result", result: { content: [] } }));
    }
    await Promise.all(many);
    expect(pathsProxy.stats().pendingAsks).toBe(0);
  }, 120_000);

  it("a cut in the middle of an answer is not an answer: asked again", async () => {
    const result = pathsProxy.mcp.listTools();
    const ask = await requests.nextExchange();
    await cutPath(pathsProxy.port, pathOf(ask));
    const again = await requests.nextExchange();
    await answerPath(pathsProxy.port, pathOf(again), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
    expect(await result).toEqual({ tools: [] });
  });

  it("an answer of JSON nested 50 000 deep is an unreadable answer (the codec's typed error), not a crash", async () => {
    const { McpAnswerError } = await import("@diverge/codec");
    const pending = pathsProxy.mcp.listTools().then(
      () => undefined,
      (error: unknown) => error,
    );
    const ask = await requests.nextExchange();
    const deep = "[".repeat(50_000) + "]".repeat(50_000);
    await answerPath(pathsProxy.port, pathOf(ask), new Uint8Array([0, ...new TextEncoder().encode(`{"tools":${deep}}`)]));
    const error = (await pending) as McpExchangeError;
    expect(error).toBeInstanceOf(McpExchangeError);
    expect(error.variant).toBe("UnreadableAnswer");
    expect((error.detail as { source: unknown }).source).toBeInstanceOf(McpAnswerError);
    expect(uncaught).toEqual([]);
  });

  it("database drivers that reset before the provider connects, hundreds of them: dropped, nothing crashes, and a held driver loses nothing", async () => {
    const { connect } = await import("node:net");
    const early = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, appPort: program.port });
    try {
      const kept = connect({ host: "127.0.0.1", port: early.multiplexed.pgPort });
      kept.on("error", () => {});
      await new Promise((resolve) => kept.once("connect", resolve));
      kept.write("startup");
      for (let i = 0; i < 200; i++) {
        const driver = connect({ host: "127.0.0.1", port: early.multiplexed.pgPort });
        driver.on("error", () => {});
        await new Promise((resolve) => driver.once("connect", resolve));
        if (i % 2 === 0) driver.resetAndDestroy();
        else driver.destroy();
      }
      await waitUntil(() => early.multiplexed.held === 1, 60_000, "only the kept driver held");
      const line = await rawConnect(early.port);
      line.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
      expect(decodeToolsBeginResponse(payloadOf(await line.next(onScope(1)))).variant).toBe("Begun");
      const announce = await line.next((frame) => frame.variant === "ChannelRequest");
      line.send({ variant: "ChannelRequest", scope: 1, channel: 9, payload: encodeToolsBeginChannelRequest({ variant: "Postgres", connection_id: 1 }) });
      expect(new TextDecoder().decode(payloadOf(await line.next(onChannel(1, 9))))).toBe("startup");
      expect(announce.channel).toBe(0);
      expect(await line.none((frame) => frame.variant === "ChannelRequest", 200)).toBe(true);
      line.socket.terminate();
      kept.destroy();
    } finally {
      await early.close();
    }
    await othersStillServed();
  });

  it("failed handshakes on / (a bad key, a wrong version, a client gone before the 101) leave the one connection to the first that succeeds", async () => {
    const { connect } = await import("node:net");
    const fresh = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, appPort: program.port });
    try {
      const attempt = async (head: string, vanish: boolean): Promise<void> => {
        const socket = connect({ host: "127.0.0.1", port: fresh.port });
        socket.on("error", () => {});
        await new Promise((resolve) => socket.once("connect", resolve));
        socket.resume();
        if (vanish) socket.write(head, () => socket.resetAndDestroy());
        else socket.end(head);
        await new Promise((resolve) => socket.once("close", resolve));
      };
      const head = (key: string, version = "13") => `GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: ${version}\r\nSec-WebSocket-Key: ${key}\r\n\r\n`;
      for (let i = 0; i < 30; i++) {
        await attempt(head("short"), false);
        await attempt(head(randomBytes(16).toString("base64"), "8"), false);
        await attempt(head(randomBytes(16).toString("base64")), true);
      }
      await waitUntil(() => fresh.multiplexed.connection === undefined, 60_000, "no connection kept");
      const line = await rawConnect(fresh.port);
      line.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
      expect(decodeToolsBeginResponse(payloadOf(await line.next(onScope(1)))).variant).toBe("Begun");
      expect(await rawUpgradeStatus(fresh.port, "/")).toBe(409);
      line.socket.terminate();
    } finally {
      await fresh.close();
    }
  });

  it("a daemon program that does not read: past its budget the connection pauses, the stalled pair alone ends, memory stays flat, and everything beside it flows", async () => {
    const { WebSocket: Ws } = await import("ws");
    const daemon = new Ws(`ws://127.0.0.1:${proxy.programPort}/daemon`);
    daemon.on("error", () => {});
    await new Promise((resolve) => daemon.once("open", resolve));
    daemon.pause();
    const announce = await raw.next((frame) => frame.variant === "ChannelRequest");
    const half = nextChannel++;
    raw.send({ variant: "ChannelRequest", scope: 1, channel: half, payload: encodeToolsBeginChannelRequest({ variant: "Daemon", connection_id: Number(new DataView(payloadOf(announce).buffer, payloadOf(announce).byteOffset + 1, 4).getUint32(0)) }) });
    const before = await settledMemory();
    const frame = new Uint8Array(MiB);
    frame[0] = 2;
    for (let i = 0; i < 128; i++) {
      raw.send({ variant: "ChannelResponse", scope: 1, channel: announce.channel, payload: frame });
      if (raw.socket.bufferedAmount > 4 * MiB) await waitUntil(() => raw.socket.bufferedAmount <= 2 * MiB, 60_000, "the provider's socket to drain");
      if (i % 32 === 0) await othersStillServed();
    }
    await waitUntil(() => raw.socket.bufferedAmount === 0, 60_000, "everything sent");
    expect((await raw.next(onChannel(1, half), 10_000)).variant).toBe("ChannelResponseFinish");
    const stats = proxy.stats().daemon;
    // Paused at its budget (never near the hard cap), then ended for reading nothing while it held the connection.
    expect(stats.pausedConnection).toBe(1);
    expect(stats.endedStalled).toBe(1);
    expect(stats.endedOverBacklog).toBe(0);
    expect(stats.holdingNow).toBe(0);
    expect(stats.maxProgramBuffered).toBeLessThan(proxy.options.pairBudgetBytes + 2 * MiB);
    expect(stats.discardedBytes).toBeGreaterThan(32 * MiB);
    const grown = ((await settledMemory()) - before) / MiB;
    expect(grown).toBeLessThan(16);
    // The proxy's channel ends with the provider's finish, as a provider does when its half is finished.
    raw.send({ variant: "ChannelResponseFinish", scope: 1, channel: announce.channel });
    daemon.terminate();
    await othersStillServed();
  }, 120_000);

  it("nothing crashed, and memory is back near its baseline", async () => {
    expect(uncaught).toEqual([]);
    const after = await settledMemory();
    const grown = (after - baseline) / MiB;
    process.stdout.write(`hostile peers: baseline ${(baseline / MiB).toFixed(1)} MiB, after ${(after / MiB).toFixed(1)} MiB, grown ${grown.toFixed(1)} MiB\n`);
    expect(grown).toBeLessThan(16);
  });
});
