// Seed 000 on the proxy side, rule by rule, against a hand-written provider over real sockets.
import { afterEach, describe, expect, it } from "vitest";
import {
  encodeMcpCallToolAnswer,
  encodeMcpListResourcesAnswer,
  encodeMcpListToolsAnswer,
  encodeMcpNotificationsAnswer,
  encodeMcpReadResourceAnswer,
  McpAnswerError,
  type RequestsAsk,
} from "@diverge/codec";
import type { McpExchangeError, NotificationStreamEvent, RunningProxy } from "../src/index.js";
import { answerPath, closed, cutPath, delay, openWs, pathOf, rawUpgradeStatus, rejection, RequestsLine, testProxy, upgradeStatus } from "./paths-helpers.js";

const TOOLS = { tools: [{ name: "echo", inputSchema: { type: "object" as const } }] };
const toolsAnswer = encodeMcpListToolsAnswer({ variant: "Result", result: TOOLS });
const textResult = (text: string) => encodeMcpCallToolAnswer({ variant: "Result", result: { content: [{ type: "text", text }] } });
const note = (n: number) => encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/message", params: { level: "info", data: n } } });

let proxy: RunningProxy | undefined;
const lines: RequestsLine[] = [];

async function setup(options: Parameters<typeof testProxy>[0] = {}) {
  proxy = await testProxy(options);
  return proxy;
}
async function line(): Promise<RequestsLine> {
  const opened = await RequestsLine.open(proxy!.port);
  lines.push(opened);
  return opened;
}

afterEach(async () => {
  for (const opened of lines.splice(0)) opened.socket.terminate();
  await proxy?.close();
  proxy = undefined;
});

describe("/requests", () => {
  it("mints channels from 1 in ascending order, and asks made with no /requests wait for the next connection", async () => {
    const p = await setup();
    const first = p.mcp.listTools();
    const second = p.mcp.callTool({ name: "echo", arguments: { n: 2 } });
    await delay(30);
    const requests = await line();
    const a = await requests.next();
    const b = await requests.next();
    expect([a.channel, a.variant]).toEqual([1, "McpListTools"]);
    expect(a.variant === "McpListTools" && a.params).toBeNull();
    expect([b.channel, b.variant]).toEqual([2, "McpCallTool"]);
    expect(b.variant === "McpCallTool" && b.params).toEqual({ name: "echo", arguments: { n: 2 } });
    // The notification ask comes after the first exchange.
    const c = await requests.next();
    expect([c.channel, c.variant]).toEqual([3, "McpNotifications"]);
    await answerPath(p.port, pathOf(a), toolsAnswer);
    await answerPath(p.port, pathOf(b), textResult("two"));
    expect(await first).toEqual(TOOLS);
    expect(await second).toEqual({ content: [{ type: "text", text: "two" }] });
    const d = p.mcp.listResources({ cursor: "x" });
    const ask = await requests.next();
    expect([ask.channel, ask.variant]).toEqual([4, "McpListResources"]);
    await answerPath(p.port, pathOf(ask), encodeMcpListResourcesAnswer({ variant: "Result", result: { resources: [] } }));
    expect(await d).toEqual({ resources: [] });
  });

  it("refuses a second /requests with 409 before the upgrade, and accepts one again once the first has ended", async () => {
    const p = await setup();
    const requests = await line();
    expect(await upgradeStatus(p.port, "/requests")).toBe(409);
    expect(await rawUpgradeStatus(p.port, "/requests")).toBe(409);
    await requests.close();
    await delay(10);
    const again = await line();
    const pending = p.mcp.listTools();
    const ask = await again.next();
    await answerPath(p.port, pathOf(ask), toolsAnswer);
    expect(await pending).toEqual(TOOLS);
  });

  it("ignores text messages on /requests and keeps the connection", async () => {
    const p = await setup();
    const requests = await line();
    requests.socket.send("hello");
    requests.socket.send("more text");
    await delay(20);
    expect(requests.socket.readyState).toBe(requests.socket.OPEN);
    const pending = p.mcp.listTools();
    const ask = await requests.next();
    await answerPath(p.port, pathOf(ask), toolsAnswer);
    expect(await pending).toEqual(TOOLS);
  });

  it("asks again, under a fresh channel on the next connection, what was announced on a /requests that ended before the path opened", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.callTool({ name: "echo", arguments: { id: "once" } });
    const lost = await requests.next();
    await requests.cut();
    // The lost channel is forgotten: opening it now is a 404, before the upgrade.
    expect(await upgradeStatus(p.port, pathOf(lost))).toBe(404);
    const next = await line();
    const again = await next.nextExchange();
    expect(again.variant).toBe("McpCallTool");
    expect(again.channel).toBeGreaterThan(lost.channel);
    expect(again.variant === "McpCallTool" && again.params).toEqual({ name: "echo", arguments: { id: "once" } });
    await answerPath(p.port, pathOf(again), textResult("done"));
    expect(await pending).toEqual({ content: [{ type: "text", text: "done" }] });
  });

  it("asks again when /requests ends cleanly before the path opened, too", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.readResource({ uri: "file:///a" });
    const lost = await requests.next();
    await requests.close();
    const next = await line();
    const again = await next.nextExchange();
    expect(again.channel).toBeGreaterThan(lost.channel);
    expect(again.variant === "McpReadResource" && again.params).toEqual({ uri: "file:///a" });
    await answerPath(p.port, pathOf(again), encodeMcpReadResourceAnswer({ variant: "Result", result: { contents: [{ uri: "file:///a", text: "A" }] } }));
    expect(await pending).toEqual({ contents: [{ uri: "file:///a", text: "A" }] });
  });

  it("keeps an exchange whose path was already open when /requests ended", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.listTools();
    const ask = await requests.next();
    const socket = await openWs(p.port, pathOf(ask));
    await requests.cut();
    socket.send(toolsAnswer);
    socket.close();
    await closed(socket);
    expect(await pending).toEqual(TOOLS);
    const next = await line();
    await delay(30);
    // Nothing of kinds 0 to 3 is asked again; only the notification ask may be pending.
    expect(next.asks.filter((a) => a.variant !== "McpNotifications")).toEqual([]);
  });
});

describe("answer paths: opening", () => {
  it("refuses unknown channels and channels of another kind with 404, a second opening with 409, a spent channel with 404", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.callTool({ name: "echo" });
    const ask = await requests.next();
    expect(await upgradeStatus(p.port, "/mcp/call-tool/999")).toBe(404);
    expect(await rawUpgradeStatus(p.port, "/mcp/call-tool/999")).toBe(404);
    expect(await upgradeStatus(p.port, `/mcp/list-tools/${ask.channel}`)).toBe(404);
    expect(await upgradeStatus(p.port, `/mcp/notifications/${ask.channel}`)).toBe(404);
    expect(await upgradeStatus(p.port, `/mcp/no-such-kind/${ask.channel}`)).toBe(404);
    expect(await upgradeStatus(p.port, "/mcp/call-tool/not-a-number")).toBe(400);
    expect(await upgradeStatus(p.port, "/mcp/call-tool/4294967296")).toBe(400);
    const first = await openWs(p.port, pathOf(ask));
    expect(await upgradeStatus(p.port, pathOf(ask))).toBe(409);
    expect(await rawUpgradeStatus(p.port, pathOf(ask))).toBe(409);
    first.send(textResult("ok"));
    first.close();
    await closed(first);
    expect(await pending).toEqual({ content: [{ type: "text", text: "ok" }] });
    expect(await upgradeStatus(p.port, pathOf(ask))).toBe(404);
  });

  it("asks again when the upgrade of an accepted path fails half way", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.listTools();
    const ask = await requests.nextExchange();
    // A raw upgrade that the proxy accepts, cut as soon as the 101 arrives: an abrupt end.
    expect(await rawUpgradeStatus(p.port, pathOf(ask))).toBe(101);
    const again = await requests.nextExchange();
    expect(again.channel).toBeGreaterThan(ask.channel);
    await answerPath(p.port, pathOf(again), toolsAnswer);
    expect(await pending).toEqual(TOOLS);
  });
});

describe("answer paths: kinds 0 to 3", () => {
  it("resolves with the result of one message and a clean close, for each of the four kinds", async () => {
    const p = await setup();
    const requests = await line();
    const calls = [p.mcp.listTools({ cursor: "c1" }), p.mcp.listResources(), p.mcp.callTool({ name: "echo", arguments: { a: 1 } }), p.mcp.readResource({ uri: "mem://x" })];
    const asks: RequestsAsk[] = [];
    while (asks.length < 4) asks.push(await requests.nextExchange());
    expect(asks.map((a) => a.variant)).toEqual(["McpListTools", "McpListResources", "McpCallTool", "McpReadResource"]);
    expect(asks[0]!.variant === "McpListTools" && asks[0]!.params).toEqual({ cursor: "c1" });
    const answers = [
      toolsAnswer,
      encodeMcpListResourcesAnswer({ variant: "Result", result: { resources: [{ uri: "mem://x", name: "x" }] } }),
      textResult("a=1"),
      encodeMcpReadResourceAnswer({ variant: "Result", result: { contents: [{ uri: "mem://x", text: "X" }] } }),
    ];
    // Answered out of order: each path is its own connection.
    await Promise.all([3, 1, 2, 0].map((i) => answerPath(p.port, pathOf(asks[i]!), answers[i]!)));
    expect(await Promise.all(calls)).toEqual([
      TOOLS,
      { resources: [{ uri: "mem://x", name: "x" }] },
      { content: [{ type: "text", text: "a=1" }] },
      { contents: [{ uri: "mem://x", text: "X" }] },
    ]);
  });

  it("rejects with the provider's MCP error, code, message and data intact", async () => {
    const p = await setup();
    const requests = await line();
    const pending = rejection(p.mcp.callTool({ name: "missing" }));
    const ask = await requests.nextExchange();
    await answerPath(p.port, pathOf(ask), encodeMcpCallToolAnswer({ variant: "Error", error: { code: -32602, message: "no tool named missing", data: { tried: "missing" } } }));
    const error = (await pending) as McpExchangeError;
    expect(error.name).toBe("McpExchangeError");
    expect(error.detail).toEqual({ variant: "McpError", error: { code: -32602, message: "no tool named missing", data: { tried: "missing" } } });
    expect(error.message).toBe("no tool named missing");
  });

  it("a clean close with no message is not served, and it is not asked again", async () => {
    const p = await setup();
    const requests = await line();
    const pending = rejection(p.mcp.callTool({ name: "echo", arguments: { id: "declined" } }));
    const ask = await requests.nextExchange();
    await answerPath(p.port, pathOf(ask));
    const error = (await pending) as McpExchangeError;
    expect(error.detail).toEqual({ variant: "NotServed", what: "tools/call", channel: ask.channel });
    // The message names the exchange, not only its channel (issue 26 §2).
    expect(error.message).toBe(`tools/call: the provider did not serve the exchange (channel ${ask.channel})`);
    // The next exchange of kinds 0 to 3 on /requests is a new one, not the declined one again.
    const marker = p.mcp.listTools();
    const next = await requests.nextExchange();
    expect(next.variant).toBe("McpListTools");
    await answerPath(p.port, pathOf(next), toolsAnswer);
    await marker;
    expect(requests.asks.filter((a) => a.variant === "McpCallTool")).toHaveLength(1);
  });

  it("a path cut abruptly before its message is asked again under a fresh channel", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.callTool({ name: "echo", arguments: { id: "cut-before" } });
    const ask = await requests.nextExchange();
    await cutPath(p.port, pathOf(ask));
    const again = await requests.nextExchange();
    expect(again.variant).toBe("McpCallTool");
    expect(again.channel).toBeGreaterThan(ask.channel);
    expect(again.variant === "McpCallTool" && again.params).toEqual({ name: "echo", arguments: { id: "cut-before" } });
    expect(await upgradeStatus(p.port, pathOf(ask))).toBe(404);
    await answerPath(p.port, pathOf(again), textResult("second time"));
    expect(await pending).toEqual({ content: [{ type: "text", text: "second time" }] });
  });

  it("a path cut abruptly after its message is not answered: the message is dropped and the exchange asked again", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.callTool({ name: "echo", arguments: { id: "cut-after" } });
    const ask = await requests.nextExchange();
    await cutPath(p.port, pathOf(ask), textResult("lost"));
    const again = await requests.nextExchange();
    expect(again.channel).toBeGreaterThan(ask.channel);
    await answerPath(p.port, pathOf(again), textResult("kept"));
    expect(await pending).toEqual({ content: [{ type: "text", text: "kept" }] });
  });

  it("ignores text messages on an answer path; the binary message is the answer", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.listTools();
    const ask = await requests.nextExchange();
    await answerPath(p.port, pathOf(ask), "not an answer", toolsAnswer, "trailing text");
    expect(await pending).toEqual(TOOLS);
  });

  it("text alone on an answer path is no message: not served", async () => {
    const p = await setup();
    const requests = await line();
    const pending = rejection(p.mcp.listTools());
    const ask = await requests.nextExchange();
    await answerPath(p.port, pathOf(ask), "text only");
    expect(((await pending) as McpExchangeError).variant).toBe("NotServed");
  });

  it("takes the first message when more than one arrives", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.callTool({ name: "echo" });
    const ask = await requests.nextExchange();
    await answerPath(p.port, pathOf(ask), textResult("first"), textResult("second"));
    expect(await pending).toEqual({ content: [{ type: "text", text: "first" }] });
  });

  const malformed: [string, Uint8Array, string, string][] = [
    ["empty", new Uint8Array(0), "Empty", "mcp answer frame is empty"],
    ["an unknown tag", new Uint8Array([7, 123, 125]), "UnknownTag", "unknown mcp answer frame tag 7"],
    ["JSON that does not parse", new Uint8Array([0, 123]), "Body", "mcp answer did not parse: EOF while parsing an object at line 1 column 1"],
    ["JSON that is not a ListToolsResult", new Uint8Array([0, ...new TextEncoder().encode('{"tools":5}')]), "Body", "mcp answer did not parse: not a ListToolsResult"],
    ["an error frame that is not ErrorData", new Uint8Array([1, ...new TextEncoder().encode('{"message":"no code"}')]), "Body", "mcp answer did not parse: not a ErrorData"],
  ];
  for (const [what, bytes, variant, message] of malformed) {
    it(`an answer that does not decode (${what}) rejects with a typed error and is not asked again`, async () => {
      const p = await setup();
      const requests = await line();
      const pending = rejection(p.mcp.listTools());
      const ask = await requests.nextExchange();
      await answerPath(p.port, pathOf(ask), bytes);
      const error = (await pending) as McpExchangeError;
      expect(error.variant).toBe("UnreadableAnswer");
      const source = (error.detail as { source: McpAnswerError }).source;
      expect(source).toBeInstanceOf(McpAnswerError);
      expect(source.variant).toBe(variant);
      expect(source.message.startsWith(message)).toBe(true);
      const marker = p.mcp.readResource({ uri: "mem://marker" });
      const next = await requests.nextExchange();
      expect(next.variant).toBe("McpReadResource");
      await answerPath(p.port, pathOf(next), encodeMcpReadResourceAnswer({ variant: "Result", result: { contents: [] } }));
      await marker;
      expect(requests.asks.filter((a) => a.variant === "McpListTools")).toHaveLength(1);
    });
  }

  it("an answer over the message limit rejects with AnswerTooLarge; an ask over it is never sent", async () => {
    const p = await setup({ maxMessageBytes: 256 });
    const requests = await line();
    const pending = rejection(p.mcp.listTools());
    const ask = await requests.nextExchange();
    const big = encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [{ name: "x".repeat(400), inputSchema: { type: "object" } }] } });
    const socket = await openWs(p.port, pathOf(ask));
    socket.send(big);
    await closed(socket);
    expect(((await pending) as McpExchangeError).detail).toEqual({ variant: "AnswerTooLarge", what: "tools/list", channel: ask.channel, limit: 256 });
    const tooBig = rejection(p.mcp.callTool({ name: "echo", arguments: { text: "y".repeat(300) } }));
    expect(((await tooBig) as McpExchangeError).variant).toBe("AskTooLarge");
    void p.mcp.listResources().catch(() => {});
    const next = await requests.nextExchange();
    expect(next.variant).toBe("McpListResources");
  });

  it("waits for as long as the provider takes: no timeout on a silent path or a silent /requests", async () => {
    const p = await setup();
    const pending = p.mcp.listTools();
    await delay(1200);
    const requests = await line();
    const ask = await requests.nextExchange();
    const socket = await openWs(p.port, pathOf(ask));
    await delay(1200);
    socket.send(toolsAnswer);
    socket.close();
    expect(await pending).toEqual(TOOLS);
  });

  it("holds asks behind the secrets gate until it opens, then asks them in order", async () => {
    const p = await setup({ secretsGate: true });
    const requests = await line();
    const first = p.mcp.listTools();
    const second = p.mcp.callTool({ name: "echo" });
    await delay(50);
    expect(requests.asks).toEqual([]);
    p.gate.open();
    const a = await requests.nextExchange();
    const b = await requests.nextExchange();
    expect([a.variant, b.variant]).toEqual(["McpListTools", "McpCallTool"]);
    await answerPath(p.port, pathOf(a), toolsAnswer);
    await answerPath(p.port, pathOf(b), textResult("b"));
    await Promise.all([first, second]);
  });

  it("rejects what is unanswered with ProxyClosed when the proxy closes", async () => {
    const p = await setup();
    const pending = rejection(p.mcp.listTools());
    await p.close();
    proxy = undefined;
    expect(((await pending) as McpExchangeError).variant).toBe("ProxyClosed");
    expect(((await rejection(p.mcp.listTools())) as McpExchangeError).variant).toBe("ProxyClosed");
  });
});

describe("the notification stream (kind 4)", () => {
  /** Makes and answers a first exchange, so the proxy asks for notifications; returns that ask. */
  async function firstStream(p: RunningProxy, requests: RequestsLine): Promise<RequestsAsk> {
    const pending = p.mcp.listTools();
    const skipped: RequestsAsk[] = [];
    const exchange = await requests.nextExchange(skipped);
    await answerPath(p.port, pathOf(exchange), toolsAnswer);
    await pending;
    const ask = skipped[0] ?? (await requests.next());
    expect(ask.variant).toBe("McpNotifications");
    return ask;
  }

  async function streamEvents(p: RunningProxy) {
    const events: NotificationStreamEvent[] = [];
    p.mcp.onNotificationStream((event) => events.push(event));
    return events;
  }

  it("is not asked before the first exchange of kinds 0 to 3, then asked once", async () => {
    const p = await setup();
    const requests = await line();
    await delay(150);
    expect(requests.asks).toEqual([]);
    const pending = p.mcp.listTools();
    const first = await requests.next();
    expect(first.variant).toBe("McpListTools");
    const second = await requests.next();
    expect(second.variant).toBe("McpNotifications");
    expect(second.channel).toBeGreaterThan(first.channel);
    const more = [p.mcp.listTools(), p.mcp.listTools()];
    const a = await requests.next();
    const b = await requests.next();
    expect([a.variant, b.variant]).toEqual(["McpListTools", "McpListTools"]);
    for (const ask of [first, a, b]) await answerPath(p.port, pathOf(ask), toolsAnswer);
    await Promise.all([pending, ...more]);
    expect(requests.asks.filter((ask) => ask.variant === "McpNotifications")).toHaveLength(1);
  });

  it("delivers each notification in order to listeners and iterators; an error ends it and it is asked again on the next /requests connection only", async () => {
    const p = await setup();
    const events = await streamEvents(p);
    const heard: unknown[] = [];
    p.mcp.onNotification((n) => heard.push(n.params));
    const iterator = p.mcp.notifications();
    const requests = await line();
    const ask = await firstStream(p, requests);
    expect(ask.variant).toBe("McpNotifications");
    const stream = await openWs(p.port, pathOf(ask));
    stream.send(note(1));
    stream.send("text is ignored");
    stream.send(note(2));
    expect((await iterator.next()).value).toEqual({ method: "notifications/message", params: { level: "info", data: 1 } });
    expect((await iterator.next()).value?.params).toEqual({ level: "info", data: 2 });
    stream.send(encodeMcpNotificationsAnswer({ variant: "Error", error: { code: -32603, message: "upstream gone" } }));
    stream.send(note(3)); // after the error: ignored
    stream.close();
    await closed(stream);
    // The stream's end is told once the proxy has read all of it (note 3 included): waited for, not slept on.
    await expect.poll(() => events.find((e) => e.type === "ended"), { timeout: 30_000 }).toBeDefined();
    expect(heard).toEqual([
      { level: "info", data: 1 },
      { level: "info", data: 2 },
    ]);
    expect(events.find((e) => e.type === "error")).toEqual({ type: "error", channel: ask.channel, error: { code: -32603, message: "upstream gone" } });
    expect(events.find((e) => e.type === "ended")).toMatchObject({ reask: "nextConnection" });
    // Not asked again on the same connection...
    await delay(100);
    expect(requests.asks.filter((a) => a.variant === "McpNotifications")).toHaveLength(1);
    await requests.close();
    // ...but on the next one, under a fresh channel.
    const next = await line();
    const again = await next.next();
    expect(again.variant).toBe("McpNotifications");
    expect(again.channel).toBeGreaterThan(ask.channel);
    await iterator.return!();
  });

  it("a clean close after notifications is asked again on the next connection", async () => {
    const p = await setup();
    const requests = await line();
    const ask = await firstStream(p, requests);
    await answerPath(p.port, pathOf(ask), note(1));
    await delay(100);
    expect(requests.asks.filter((a) => a.variant === "McpNotifications")).toHaveLength(1);
    await requests.cut();
    const next = await line();
    expect((await next.next()).variant).toBe("McpNotifications");
  });

  it("an abrupt end is asked again at once on the live connection", async () => {
    const p = await setup();
    const requests = await line();
    const events = await streamEvents(p);
    const ask = await firstStream(p, requests);
    await cutPath(p.port, pathOf(ask), note(1));
    const again = await requests.next();
    expect(again.variant).toBe("McpNotifications");
    expect(again.channel).toBeGreaterThan(ask.channel);
    expect(events.find((e) => e.type === "ended")).toMatchObject({ reask: "now", ending: { how: "abrupt" } });
  });

  it("a notification ask lost with /requests is asked again on the next connection", async () => {
    const p = await setup();
    const requests = await line();
    const pending = p.mcp.listTools();
    const exchange = await requests.next();
    const ask = await requests.next();
    expect(ask.variant).toBe("McpNotifications");
    await requests.cut();
    const next = await line();
    const asks = [await next.next(), await next.next()];
    expect(asks.map((a) => a.variant).sort()).toEqual(["McpListTools", "McpNotifications"]);
    expect(Math.min(...asks.map((a) => a.channel))).toBeGreaterThan(Math.max(exchange.channel, ask.channel));
    await answerPath(p.port, pathOf(asks.find((a) => a.variant === "McpListTools")!), toolsAnswer);
    await pending;
  });

  it("a clean close with no message is not served: notifications are never asked again", async () => {
    const p = await setup();
    const requests = await line();
    const events = await streamEvents(p);
    const ask = await firstStream(p, requests);
    await answerPath(p.port, pathOf(ask));
    await expect.poll(() => events.find((e) => e.type === "ended"), { timeout: 30_000 }).toMatchObject({ reask: "never" });
    await requests.close();
    const next = await line();
    const marker = p.mcp.listTools();
    const after = await next.next();
    expect(after.variant).toBe("McpListTools");
    await answerPath(p.port, pathOf(after), toolsAnswer);
    await marker;
    await delay(50);
    expect(next.asks.filter((a) => a.variant === "McpNotifications")).toEqual([]);
  });

  it("a notification that does not decode is reported, the proxy closes the path, and asks again on the next connection", async () => {
    const p = await setup();
    const requests = await line();
    const events = await streamEvents(p);
    const ask = await firstStream(p, requests);
    const stream = await openWs(p.port, pathOf(ask));
    stream.send(new Uint8Array([0, ...new TextEncoder().encode('{"params":{}}')]));
    await closed(stream);
    const unreadable = events.find((e) => e.type === "unreadable") as Extract<NotificationStreamEvent, { type: "unreadable" }>;
    expect(unreadable.source.variant).toBe("Body");
    expect(unreadable.source.message.startsWith("mcp answer did not parse: not a ServerNotification")).toBe(true);
    await requests.close();
    const next = await line();
    expect((await next.next()).variant).toBe("McpNotifications");
  });

  it("delivers each notification once, as it arrives, even on a path later cut; the re-asked path carries only new ones", async () => {
    const p = await setup();
    const heard: unknown[] = [];
    p.mcp.onNotification((n) => heard.push(n.params));
    const requests = await line();
    const ask = await firstStream(p, requests);
    await cutPath(p.port, pathOf(ask), note(1));
    const again = await requests.next();
    await answerPath(p.port, pathOf(again), note(2));
    await expect.poll(() => heard, { timeout: 30_000 }).toEqual([
      { level: "info", data: 1 },
      { level: "info", data: 2 },
    ]);
  });
});
