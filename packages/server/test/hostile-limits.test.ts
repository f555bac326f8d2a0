// Limits, each over real sockets: the message limit on every path kind (the exchange fails with a
// typed error and the proxy goes on), the cap on pending asks, the caps on open channels and scopes
// of the multiplexed connection, dropped notifications counted per stream, and postgres backpressure
// toward a provider that does not read.
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  decodeMcpCallToolAnswer,
  decodeToolsBeginResponse,
  encodeContainerProxyRequest,
  encodeMcpCallToolAnswer,
  encodeMcpListToolsAnswer,
  encodeMcpNotificationsAnswer,
  encodeToolsBeginChannelRequest,
  type ToolsBeginChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { McpExchangeError, startProxy, type ProxyOptions, type RunningProxy } from "../src/index.js";
import { onChannel, onScope, rawConnect, type RawConnection } from "./multiplexed-support.js";
import { answerPath, closed, openWs, pathOf, rejection, RequestsLine } from "./paths-helpers.js";
import { MiB, startTestProgram, waitUntil, type TestProgram } from "./hostile-support.js";

const proxies: RunningProxy[] = [];
const programs: TestProgram[] = [];
const sockets: { terminate(): void }[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
  await Promise.allSettled(programs.splice(0).map((program) => program.close()));
});

async function proxyWith(options: ProxyOptions = {}): Promise<{ proxy: RunningProxy; program: TestProgram }> {
  const program = await startTestProgram();
  programs.push(program);
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, appPort: program.port, ...options });
  proxies.push(proxy);
  return { proxy, program };
}

const BEGIN = encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: {} } });

async function begin(proxy: RunningProxy): Promise<RawConnection> {
  const raw = await rawConnect(proxy.port);
  sockets.push(raw.socket);
  raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
  const answer = await raw.next(onScope(1));
  expect(decodeToolsBeginResponse((answer as { payload: Uint8Array }).payload).variant).toBe("Begun");
  return raw;
}

function channel(raw: RawConnection, number: number, request: ToolsBeginChannelRequest): void {
  raw.send({ variant: "ChannelRequest", scope: 1, channel: number, payload: encodeToolsBeginChannelRequest(request) });
}

/** One exchange through /requests and its answer path, to show the proxy still serves. */
async function stillServes(proxy: RunningProxy): Promise<void> {
  const requests = await RequestsLine.open(proxy.port);
  const result = proxy.mcp.listTools();
  const ask = await requests.nextExchange();
  await answerPath(proxy.port, pathOf(ask), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
  expect(await result).toEqual({ tools: [] });
  await requests.close();
}

describe("the message limit, on every path kind", () => {
  const LIMIT = 64 * 1024;

  it("/requests: an ask over the limit fails with AskTooLarge and is never sent; the next ask is", async () => {
    const { proxy } = await proxyWith({ maxMessageBytes: LIMIT });
    const requests = await RequestsLine.open(proxy.port);
    const error = await rejection(proxy.mcp.callTool({ name: "big", arguments: { blob: "x".repeat(LIMIT) } }));
    expect(error).toBeInstanceOf(McpExchangeError);
    expect(error.detail).toMatchObject({ variant: "AskTooLarge", limit: LIMIT });
    expect(requests.unread).toBe(0);
    await requests.close();
    await stillServes(proxy);
  });

  it("an answer path: an answer over the limit fails with AnswerTooLarge (close 1009); the proxy goes on", async () => {
    const { proxy } = await proxyWith({ maxMessageBytes: LIMIT });
    const requests = await RequestsLine.open(proxy.port);
    const result = rejection(proxy.mcp.callTool({ name: "t" }));
    const ask = await requests.nextExchange();
    const socket = await openWs(proxy.port, pathOf(ask));
    socket.send(encodeMcpCallToolAnswer({ variant: "Result", result: { content: [{ type: "text", text: "y".repeat(LIMIT) }] } }));
    expect(await closed(socket)).toBe(1009);
    const error = await result;
    expect(error.detail).toMatchObject({ variant: "AnswerTooLarge", channel: ask.channel, limit: LIMIT });
    await requests.close();
    await stillServes(proxy);
  });

  it("the notification path: a message over the limit ends the path, is counted as dropped, and the stream is asked again on the next /requests", async () => {
    const { proxy } = await proxyWith({ maxMessageBytes: LIMIT });
    const requests = await RequestsLine.open(proxy.port);
    const heard: unknown[] = [];
    proxy.mcp.onNotification((notification) => heard.push(notification));
    const first = proxy.mcp.listTools();
    const ask = await requests.nextExchange();
    await answerPath(proxy.port, pathOf(ask), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
    await first;
    const stream = await requests.next();
    expect(stream.variant).toBe("McpNotifications");
    const socket = await openWs(proxy.port, pathOf(stream));
    socket.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/message", params: { level: "info", data: "small" } } }));
    socket.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/message", params: { level: "info", data: "z".repeat(LIMIT) } } }));
    expect(await closed(socket)).toBe(1009);
    await waitUntil(() => proxy.stats().droppedNotifications.total === 1, 60_000, "the drop to be counted");
    expect(proxy.stats().droppedNotifications.byStream).toEqual({ "/mcp/notifications": 1 });
    expect(heard).toHaveLength(1);
    await requests.close();
    const again = await RequestsLine.open(proxy.port);
    expect((await again.next()).variant).toBe("McpNotifications");
    await again.close();
  });

  it("the program's /mcp: a body over the limit gets 413; the endpoint goes on", async () => {
    const { proxy } = await proxyWith({ maxMessageBytes: LIMIT });
    const url = `http://127.0.0.1:${proxy.programPort}/mcp`;
    const big = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { pad: "p".repeat(LIMIT) } }) });
    expect(big.status).toBe(413);
    const init = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } }),
    });
    expect(init.status).toBe(200);
    await init.text();
  });

  it("/: a frame over the limit closes the connection with 1009; the proxy goes on serving /requests", async () => {
    const { proxy } = await proxyWith({ maxMessageBytes: LIMIT });
    const raw = await begin(proxy);
    raw.send({ variant: "ChannelRequest", scope: 1, channel: 3, payload: new Uint8Array(LIMIT) });
    expect(await raw.closed).toBe(1009);
    await stillServes(proxy);
  });

  it("/: a container's answer over the limit becomes [1] -32603 saying so, and is counted; the connection goes on", async () => {
    const { proxy } = await proxyWith({ maxMessageBytes: LIMIT });
    const raw = await begin(proxy);
    channel(raw, 1, { variant: "McpCallTool", params: { name: "big", arguments: { bytes: LIMIT * 2 } } });
    const response = await raw.next(onChannel(1, 1), 10_000);
    const decoded = decodeMcpCallToolAnswer((response as { payload: Uint8Array }).payload, { check: checkMcp });
    expect(decoded).toMatchObject({ variant: "Error", error: { code: -32603 } });
    expect((await raw.next(onChannel(1, 1))).variant).toBe("ChannelResponseFinish");
    expect(proxy.stats().oversizedAnswers).toBe(1);
    channel(raw, 2, { variant: "McpCallTool", params: { name: "big", arguments: { bytes: 10 } } });
    const small = await raw.next(onChannel(1, 2), 10_000);
    expect(decodeMcpCallToolAnswer((small as { payload: Uint8Array }).payload, { check: checkMcp }).variant).toBe("Result");
  });

  it("/daemon: a program message over the limit closes that socket only (1009)", async () => {
    const { proxy } = await proxyWith({ maxMessageBytes: LIMIT });
    const raw = await begin(proxy);
    const daemon = await openWs(proxy.programPort, "/daemon");
    sockets.push(daemon);
    await raw.next((frame) => frame.variant === "ChannelRequest");
    daemon.send(new Uint8Array(LIMIT + 1));
    expect(await closed(daemon)).toBe(1009);
    channel(raw, 9, { variant: "McpCallTool", params: { name: "echo", arguments: { value: 1 } } });
    expect((await raw.next(onChannel(1, 9), 10_000)).variant).toBe("ChannelResponse");
  });
});

describe("bounded queues and caps", () => {
  it("pending asks: beyond maxPendingAsks an exchange fails at once with TooManyPending, counted; room again once answered", async () => {
    const { proxy } = await proxyWith({ maxPendingAsks: 5 });
    const held = Array.from({ length: 5 }, (_, i) => proxy.mcp.callTool({ name: `t${i}` }));
    const over = await rejection(proxy.mcp.callTool({ name: "over" }));
    expect(over).toBeInstanceOf(McpExchangeError);
    expect(over.detail).toEqual({ variant: "TooManyPending", limit: 5 });
    expect(proxy.stats()).toMatchObject({ pendingAsks: 5, refusedAsks: 1 });
    const requests = await RequestsLine.open(proxy.port);
    for (let i = 0; i < 5; i++) {
      const ask = await requests.nextExchange();
      await answerPath(proxy.port, pathOf(ask), encodeMcpCallToolAnswer({ variant: "Result", result: { content: [] } }));
    }
    await Promise.all(held);
    expect(proxy.stats().pendingAsks).toBe(0);
    const ok = proxy.mcp.callTool({ name: "after" });
    const ask = await requests.nextExchange();
    await answerPath(proxy.port, pathOf(ask), encodeMcpCallToolAnswer({ variant: "Result", result: { content: [] } }));
    await ok;
    await requests.close();
  });

  it("the program's MCP client sees TooManyPending as -32603 with its variant", async () => {
    const { proxy } = await proxyWith({ maxPendingAsks: 1 });
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    const client = new Client({ name: "program", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`)));
    const first = client.callTool({ name: "a" }).catch((error: unknown) => error);
    await waitUntil(() => proxy.stats().pendingAsks === 1);
    const second = await client.callTool({ name: "b" }).catch((error: unknown) => error);
    expect(second).toMatchObject({ code: -32603, data: { diverge: "TooManyPending" } });
    const requests = await RequestsLine.open(proxy.port);
    await answerPath(proxy.port, pathOf(await requests.nextExchange()), encodeMcpCallToolAnswer({ variant: "Result", result: { content: [{ type: "text", text: "first" }] } }));
    expect(await first).toMatchObject({ content: [{ text: "first" }] });
    await client.close();
    await requests.close();
  });

  it("open channels on /: a channel request beyond maxOpenChannels gets a bare finish, counted; a finished channel frees its place", async () => {
    const { proxy } = await proxyWith({ maxOpenChannels: 3 });
    const raw = await begin(proxy);
    // Notification channels stay open for the connection's life.
    for (let c = 0; c < 3; c++) channel(raw, c, { variant: "McpNotifications" });
    await waitUntil(() => proxy.stats().openChannels === 3);
    channel(raw, 3, { variant: "McpListTools", params: null });
    expect((await raw.next(onChannel(1, 3))).variant).toBe("ChannelResponseFinish");
    expect(proxy.stats()).toMatchObject({ openChannels: 3, refusedChannels: 1 });
    expect(await raw.none(onChannel(1, 0), 200)).toBe(true);
  });

  it("open channels on /: with one place left, exchanges go through one by one", async () => {
    const { proxy } = await proxyWith({ maxOpenChannels: 2 });
    const raw = await begin(proxy);
    channel(raw, 100, { variant: "McpNotifications" });
    for (let c = 0; c < 5; c++) {
      channel(raw, c, { variant: "McpCallTool", params: { name: "echo", arguments: { value: c } } });
      expect((await raw.next(onChannel(1, c), 10_000)).variant).toBe("ChannelResponse");
      expect((await raw.next(onChannel(1, c))).variant).toBe("ChannelResponseFinish");
    }
    expect(proxy.stats().refusedChannels).toBe(0);
  });

  it("open scopes on /: a request beyond maxOpenScopes gets a bare finish, counted", async () => {
    const { proxy } = await proxyWith({ maxOpenScopes: 1 });
    const raw = await begin(proxy);
    raw.send({ variant: "Request", scope: 2, channel: 0, payload: BEGIN });
    expect((await raw.next(onScope(2))).variant).toBe("ResponseFinish");
    expect(proxy.stats().refusedScopes).toBe(1);
  });

  it("notifications toward a provider that does not read are dropped and counted per channel; the proxy's memory stays bounded", async () => {
    const { proxy } = await proxyWith({ maxNotificationBacklogBytes: 256 * 1024 });
    const raw = await begin(proxy);
    channel(raw, 7, { variant: "McpNotifications" });
    await waitUntil(() => proxy.stats().openChannels === 1);
    // Let the subscription settle, then stop reading: the proxy's send buffer fills.
    await new Promise((resolve) => setTimeout(resolve, 100));
    raw.socket.pause();
    channel(raw, 8, { variant: "McpCallTool", params: { name: "spam", arguments: { count: 400, bytes: 16 * 1024 } } });
    await waitUntil(() => proxy.stats().droppedNotifications.total > 0, 60_000, "drops");
    await waitUntil(() => proxy.multiplexed.connection!.frames.bufferedAmount > 0, 60_000);
    const stats = proxy.stats();
    expect(stats.droppedNotifications.byStream["/ channel 7"]).toBe(stats.droppedNotifications.total);
    // Never much more than the backlog level plus one notification waits toward the provider.
    expect(proxy.multiplexed.connection!.frames.bufferedAmount).toBeLessThan(256 * 1024 + 64 * 1024);
    raw.socket.resume();
    const answer = await raw.next(onChannel(1, 8), 20_000);
    expect(decodeMcpCallToolAnswer((answer as { payload: Uint8Array }).payload, { check: checkMcp }).variant).toBe("Result");
    const delivered = raw.frames.filter((frame) => frame.variant === "ChannelResponse" && frame.channel === 7).length;
    await waitUntil(() => raw.frames.filter((frame) => frame.variant === "ChannelResponse" && frame.channel === 7).length + proxy.stats().droppedNotifications.total >= 400, 60_000, "every notification delivered or counted");
    expect(delivered + proxy.stats().droppedNotifications.total).toBeLessThanOrEqual(400);
  }, 120_000);

  it("a notifications() loop that does not pull keeps at most 1024, counting the rest as dropped", async () => {
    const { proxy } = await proxyWith();
    const requests = await RequestsLine.open(proxy.port);
    const loop = proxy.mcp.notifications();
    const first = proxy.mcp.listTools();
    await answerPath(proxy.port, pathOf(await requests.nextExchange()), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
    await first;
    const stream = await requests.next();
    const socket = await openWs(proxy.port, pathOf(stream));
    for (let i = 0; i < 1500; i++) socket.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/message", params: { level: "info", data: i } } }));
    await waitUntil(() => proxy.stats().droppedNotifications.total === 476, 60_000, "476 drops");
    expect(proxy.stats().droppedNotifications.byStream).toEqual({ iterators: 476 });
    // The oldest went: the loop resumes at the 477th.
    expect((await loop.next()).value).toMatchObject({ params: { data: 476 } });
    await loop.return!();
    socket.close();
    await requests.close();
  });

  it("postgres: a driver flooding toward a provider that does not read is paused; the proxy's buffer stays bounded", async () => {
    const { proxy } = await proxyWith();
    const raw = await begin(proxy);
    const driver = connect({ host: "127.0.0.1", port: proxy.multiplexed.pgPort });
    sockets.push({ terminate: () => driver.destroy() });
    await new Promise((resolve) => driver.once("connect", resolve));
    const announce = await raw.next((frame) => frame.variant === "ChannelRequest");
    raw.socket.pause();
    raw.send({ variant: "ChannelRequest", scope: 1, channel: 50, payload: encodeToolsBeginChannelRequest({ variant: "Postgres", connection_id: 1 }) });
    expect(announce.variant).toBe("ChannelRequest");
    const chunk = Buffer.alloc(64 * 1024, 7);
    let written = 0;
    let refusedWrites = 0;
    // Write until the driver's socket says stop several times over: the proxy must stop reading it.
    for (let i = 0; i < 640 && refusedWrites < 50; i++) {
      if (!driver.write(chunk)) {
        refusedWrites++;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      written += chunk.length;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stats = proxy.stats().postgres;
    expect(stats.maxProviderBuffered).toBeLessThan(4 * MiB);
    expect(stats.toProviderBytes).toBeLessThan(written);
    expect(driver.writableLength).toBeGreaterThan(0);
    raw.socket.resume();
    await waitUntil(() => proxy.stats().postgres.toProviderBytes === written, 60_000, "every byte carried once the provider reads");
    expect(proxy.stats().postgres.maxProviderBuffered).toBeLessThan(4 * MiB);
  }, 120_000);
});

describe("diverge-proxy flags for the limits", () => {
  it("maps --max-pending-asks, --max-open-channels, --max-open-scopes, --max-notification-backlog-bytes, --max-pair-backlog-bytes, --pair-budget-bytes, --pair-stall-ms, --max-pair-spill-bytes, --max-spill-bytes, --spill-dir, --max-held-connections and --max-tree-watches", async () => {
    const { spawn } = await import("node:child_process");
    const { fileURLToPath } = await import("node:url");
    const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--max-pending-asks", "7", "--max-open-channels", "9", "--max-open-scopes", "3", "--max-notification-backlog-bytes", "4096", "--max-pair-backlog-bytes", "65536", "--pair-budget-bytes", "16384", "--pair-stall-ms", "2500", "--max-pair-spill-bytes", "0", "--max-spill-bytes", "1048576", "--spill-dir", "/tmp", "--max-held-connections", "5", "--max-tree-watches", "4"], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    await new Promise<void>((resolve) => child.stdout.on("data", () => resolve()));
    child.kill("SIGTERM");
    expect(await new Promise((resolve) => child.on("exit", resolve))).toBe(0);
    const shown = JSON.parse(/diverge-proxy options (\{.*\})/.exec(stderr)![1]!);
    expect(shown).toMatchObject({ maxPendingAsks: 7, maxOpenChannels: 9, maxOpenScopes: 3, maxNotificationBacklogBytes: 4096, maxPairBacklogBytes: 65536, pairBudgetBytes: 16384, pairStallMs: 2500, maxPairSpillBytes: 0, maxSpillBytes: 1048576, spillDir: "/tmp", maxHeldConnections: 5, maxTreeWatches: 4 });
    expect(shown.spillPool).toBeUndefined();
    const bad = spawn(process.execPath, [cli, "--max-open-channels", "0"], { stdio: "ignore" });
    expect(await new Promise((resolve) => bad.on("exit", resolve))).toBe(2);
  });
});

