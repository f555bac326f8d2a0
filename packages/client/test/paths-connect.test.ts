// connectProxy against a real proxy (@diverge/server) and, for what a real proxy never sends, a fake one.
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { decodeMcpNotificationsAnswer, RequestsAskError, type ServerNotification } from "@diverge/codec";
import { startProxy, type McpExchangeError, type NotificationStreamEvent, type RunningProxy } from "@diverge/server";
import { connectProxy, ProviderError, type PathsConnection, type PathsConnectionEvent, type ProxyHandlers } from "../src/index.js";
import { delay, FakeProxy, rawAsk, rejection } from "./paths-helpers.js";

const running: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of running.splice(0).reverse()) await item.close();
});

async function proxy(): Promise<RunningProxy> {
  const p = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  running.push(p);
  return p;
}

function connect(url: string, handlers: ProxyHandlers, options: Parameters<typeof connectProxy>[2] = {}): { connection: PathsConnection; events: PathsConnectionEvent[] } {
  const events: PathsConnectionEvent[] = [];
  const connection = connectProxy(url, handlers, { minBackoffMs: 10, maxBackoffMs: 50, ...options, onEvent: (event) => events.push(event) });
  running.push(connection);
  return { connection, events };
}

const errorsOf = (events: PathsConnectionEvent[]) => events.flatMap((event) => (event.type === "error" ? [event.error] : []));

describe("connectProxy with a real proxy", () => {
  it("dispatches kinds 0 to 3 to their typed handlers and answers with their results", async () => {
    const p = await proxy();
    const seen: unknown[] = [];
    const { connection } = connect(`ws://127.0.0.1:${p.port}`, {
      listTools: (params, ask) => {
        seen.push(["listTools", params, ask.path.startsWith("/mcp/list-tools/")]);
        return { variant: "Result", result: { tools: [{ name: "t", inputSchema: { type: "object" } }] } };
      },
      listResources: async (params) => {
        seen.push(["listResources", params]);
        return { variant: "Result", result: { resources: [], nextCursor: "n" } };
      },
      callTool: async (params, ask) => {
        seen.push(["callTool", params, ask.channel > 0]);
        return { variant: "Result", result: { content: [{ type: "text", text: `called ${params.name}` }] } };
      },
      readResource: async (params) => {
        seen.push(["readResource", params]);
        return { variant: "Result", result: { contents: [{ uri: params.uri, text: "body" }] } };
      },
    });
    await connection.whenConnected();
    expect(connection.connected).toBe(true);
    expect(await p.mcp.listTools()).toEqual({ tools: [{ name: "t", inputSchema: { type: "object" } }] });
    expect(await p.mcp.listResources({ cursor: "c" })).toEqual({ resources: [], nextCursor: "n" });
    expect(await p.mcp.callTool({ name: "go", arguments: { x: 1 } })).toEqual({ content: [{ type: "text", text: "called go" }] });
    expect(await p.mcp.readResource({ uri: "a:b" })).toEqual({ contents: [{ uri: "a:b", text: "body" }] });
    expect(seen).toEqual([
      ["listTools", null, true],
      ["listResources", { cursor: "c" }],
      ["callTool", { name: "go", arguments: { x: 1 } }, true],
      ["readResource", { uri: "a:b" }],
    ]);
  });

  it("relays an MCP error answer with its code; a throwing handler answers -32603 and is reported", async () => {
    const p = await proxy();
    const { connection, events } = connect(`ws://127.0.0.1:${p.port}`, {
      callTool: async (params) => {
        if (params.name === "boom") throw new Error("handler exploded");
        return { variant: "Error", error: { code: -32602, message: "bad arguments", data: [1, 2] } };
      },
    });
    await connection.whenConnected();
    const relayed = (await rejection(p.mcp.callTool({ name: "x" }))) as McpExchangeError;
    expect(relayed.detail).toEqual({ variant: "McpError", error: { code: -32602, message: "bad arguments", data: [1, 2] } });
    const thrown = (await rejection(p.mcp.callTool({ name: "boom" }))) as McpExchangeError;
    expect(thrown.detail).toEqual({ variant: "McpError", error: { code: -32603, message: "handler exploded" } });
    expect(errorsOf(events).map((error) => [error.variant, error.message])).toEqual([["HandlerFailed", expect.stringContaining("handler exploded")]]);
  });

  it("declines (clean close, no message) when a handler is missing or returns undefined: the proxy reads not served", async () => {
    const p = await proxy();
    const { connection, events } = connect(`ws://127.0.0.1:${p.port}`, { listTools: () => undefined });
    await connection.whenConnected();
    expect(((await rejection(p.mcp.listTools())) as McpExchangeError).variant).toBe("NotServed");
    expect(((await rejection(p.mcp.readResource({ uri: "x:y" }))) as McpExchangeError).variant).toBe("NotServed");
    const ended = events.filter((event) => event.type === "pathEnded");
    expect(ended.some((event) => event.type === "pathEnded" && event.path.startsWith("/mcp/list-tools/") && event.outcome === "declined" && event.ending.clean)).toBe(true);
  });

  it("gives the notifications handler a sink: sent notifications reach the proxy, fail() ends the stream with its error", async () => {
    const p = await proxy();
    const heard: ServerNotification[] = [];
    const stream: NotificationStreamEvent[] = [];
    p.mcp.onNotification((notification) => heard.push(notification));
    p.mcp.onNotificationStream((event) => stream.push(event));
    let aborted = false;
    const { connection } = connect(`ws://127.0.0.1:${p.port}`, {
      listTools: () => ({ variant: "Result", result: { tools: [] } }),
      notifications: (sink, ask) => {
        expect(ask.path).toBe(`/mcp/notifications/${ask.channel}`);
        sink.signal.addEventListener("abort", () => (aborted = true));
        sink.send({ method: "notifications/tools/list_changed" });
        sink.send({ method: "notifications/message", params: { level: "info", data: "two" } });
        setTimeout(() => sink.fail({ code: -32001, message: "upstream went away" }), 20);
      },
    });
    await connection.whenConnected();
    await p.mcp.listTools();
    await waitFor(() => stream.some((event) => event.type === "ended"));
    expect(heard).toEqual([{ method: "notifications/tools/list_changed" }, { method: "notifications/message", params: { level: "info", data: "two" } }]);
    expect(stream.find((event) => event.type === "error")).toMatchObject({ error: { code: -32001, message: "upstream went away" } });
    expect(stream.find((event) => event.type === "ended")).toMatchObject({ ending: { how: "clean" }, reask: "nextConnection" });
    await waitFor(() => aborted);
  });

  it("declines notifications without a handler: the proxy never asks for them again", async () => {
    const p = await proxy();
    const stream: NotificationStreamEvent[] = [];
    p.mcp.onNotificationStream((event) => stream.push(event));
    const { connection } = connect(`ws://127.0.0.1:${p.port}`, { listTools: () => ({ variant: "Result", result: { tools: [] } }) });
    await connection.whenConnected();
    await p.mcp.listTools();
    await waitFor(() => stream.some((event) => event.type === "ended"));
    expect(stream.find((event) => event.type === "ended")).toMatchObject({ reask: "never" });
  });

  it("keeps retrying /requests while another provider holds it (409), then takes over", async () => {
    const p = await proxy();
    const first = connect(`ws://127.0.0.1:${p.port}`, { listTools: () => ({ variant: "Result", result: { tools: [{ name: "first", inputSchema: { type: "object" } }] } }) });
    await first.connection.whenConnected();
    const second = connect(`ws://127.0.0.1:${p.port}`, { listTools: () => ({ variant: "Result", result: { tools: [{ name: "second", inputSchema: { type: "object" } }] } }) });
    await waitFor(() => errorsOf(second.events).length >= 2);
    expect(errorsOf(second.events).every((error) => error.variant === "RequestsUnavailable" && error.detail.variant === "RequestsUnavailable" && error.detail.status === 409)).toBe(true);
    expect((await p.mcp.listTools()).tools[0]!.name).toBe("first");
    await first.connection.close();
    await second.connection.whenConnected();
    expect((await p.mcp.listTools()).tools[0]!.name).toBe("second");
  });

  it("close() ends everything abruptly, so the proxy asks again what was in flight", async () => {
    const p = await proxy();
    let started!: () => void;
    const inFlight = new Promise<void>((resolve) => (started = resolve));
    const slow = connect(`ws://127.0.0.1:${p.port}`, {
      callTool: () => {
        started();
        return new Promise(() => {}); // never answers
      },
    });
    await slow.connection.whenConnected();
    const call = p.mcp.callTool({ name: "long" });
    await inFlight;
    await slow.connection.close();
    const fresh = connect(`ws://127.0.0.1:${p.port}`, { callTool: (params) => ({ variant: "Result", result: { content: [{ type: "text", text: `again ${params.name}` }] } }) });
    await fresh.connection.whenConnected();
    expect(await call).toEqual({ content: [{ type: "text", text: "again long" }] });
  });

  it("uses the WebSocket implementation it is given", async () => {
    const p = await proxy();
    const dialled: string[] = [];
    class RecordingWebSocket extends WebSocket {
      constructor(url: string) {
        super(url);
        dialled.push(new URL(url).pathname);
      }
    }
    const { connection } = connect(`ws://127.0.0.1:${p.port}`, { listTools: () => ({ variant: "Result", result: { tools: [] } }) }, { WebSocket: RecordingWebSocket });
    await connection.whenConnected();
    await p.mcp.listTools();
    expect(dialled[0]).toBe("/requests");
    expect(dialled.some((path) => path.startsWith("/mcp/list-tools/"))).toBe(true);
  });
});

describe("connectProxy with a fake proxy", () => {
  async function fake() {
    const proxy = new FakeProxy();
    const url = await proxy.start();
    running.push(proxy);
    return { proxy, url };
  }

  it("reports a malformed ask as a typed error; opens and closes its path with no message when channel and kind can be read; keeps the connection", async () => {
    const { proxy, url } = await fake();
    const { events } = connect(url, { callTool: () => ({ variant: "Result", result: { content: [] } }) });
    await proxy.until(() => proxy.requests !== undefined);
    const requests = proxy.requests!;
    requests.send(new Uint8Array([0, 0, 1])); // shorter than the header
    requests.send(rawAsk(7, 2, "{not json")); // call tool, params do not parse
    requests.send(rawAsk(8, 2, '{"arguments":{}}')); // call tool, params of the wrong type
    requests.send(rawAsk(9, 200)); // unknown kind: no path to open
    requests.send(rawAsk(10, 6, new Uint8Array([0, 9, 65]))); // vault set whose key length overruns
    requests.send("a text message"); // ignored
    requests.send(rawAsk(11, 2, '{"name":"fine"}')); // and the connection still answers
    await proxy.until(() => proxy.paths.length >= 4);
    await Promise.all(proxy.paths.map((path) => path.closed));
    const byPath = Object.fromEntries(proxy.paths.map((path) => [path.path, path]));
    for (const declined of ["/mcp/call-tool/7", "/mcp/call-tool/8", "/vault/set/10"]) {
      expect(byPath[declined]?.messages).toEqual([]);
      expect(byPath[declined]?.closeCode).not.toBe(1006);
    }
    expect(byPath["/mcp/call-tool/11"]?.messages).toHaveLength(1);
    expect(proxy.paths).toHaveLength(4);
    const malformed = errorsOf(events).filter((error) => error.variant === "MalformedAsk");
    expect(malformed.map((error) => error.message)).toEqual([
      "request frame is shorter than its header",
      "mcp params did not parse: key must be a string at line 1 column 2; /mcp/call-tool/7 closed with no message",
      expect.stringMatching(/^mcp params did not parse: not a CallToolRequestParams.*; \/mcp\/call-tool\/8 closed with no message$/),
      "unknown request kind 200",
      expect.stringMatching(/^vault request did not decode: .*; \/vault\/set\/10 closed with no message$/),
    ]);
    for (const error of malformed) {
      expect(error).toBeInstanceOf(ProviderError);
      expect((error.detail as { source: unknown }).source).toBeInstanceOf(RequestsAskError);
    }
    expect(malformed[3]!.detail).toMatchObject({ channel: 9, kind: 200, path: undefined });
    expect(proxy.requestsSockets).toHaveLength(1);
    expect(requests.readyState).toBe(requests.OPEN);
  });

  it("declines asks of the kinds it does not answer (vault, command, postgres, FUSE) on their own paths", async () => {
    const { proxy, url } = await fake();
    connect(url, {});
    await proxy.until(() => proxy.requests !== undefined);
    proxy.requests!.send(rawAsk(20, 5, "key"));
    proxy.requests!.send(rawAsk(21, 10, "ls"));
    proxy.requests!.send(rawAsk(22, 11));
    await proxy.until(() => proxy.paths.length === 3);
    await Promise.all(proxy.paths.map((path) => path.closed));
    expect(proxy.paths.map((path) => [path.path, path.messages.length]).sort()).toEqual([
      ["/command/21", 0],
      ["/postgres/22", 0],
      ["/vault/get/20", 0],
    ]);
  });

  it("dials /requests again when it ends, with backoff, and answers on the new connection", async () => {
    const { proxy, url } = await fake();
    const { events } = connect(url, { listTools: () => ({ variant: "Result", result: { tools: [] } }) }, { minBackoffMs: 20, maxBackoffMs: 80 });
    await proxy.until(() => proxy.requests !== undefined);
    proxy.requests!.terminate();
    await proxy.until(() => proxy.requestsSockets.length === 2 && proxy.requests !== undefined);
    proxy.requests!.close();
    await proxy.until(() => proxy.requestsSockets.length === 3 && proxy.requests !== undefined);
    // While /requests is refused, the provider keeps trying, each time waiting longer.
    proxy.refuseRequests = 503;
    const refusedAt = Date.now();
    proxy.requests!.terminate();
    await waitFor(() => errorsOf(events).filter((error) => error.variant === "RequestsUnavailable").length >= 3);
    expect(Date.now() - refusedAt).toBeGreaterThanOrEqual(20 + 40);
    const refusals = errorsOf(events).filter((error) => error.variant === "RequestsUnavailable");
    expect(refusals[0]!.detail).toMatchObject({ status: 503 });
    proxy.refuseRequests = undefined;
    await proxy.until(() => proxy.requestsSockets.length === 4 && proxy.requests !== undefined);
    proxy.requests!.send(rawAsk(5, 0, "null"));
    await proxy.until(() => proxy.paths.length === 1);
    await proxy.paths[0]!.closed;
    expect(proxy.paths[0]!.path).toBe("/mcp/list-tools/5");
    expect(proxy.paths[0]!.messages).toHaveLength(1);
    expect(events.filter((event) => event.type === "requestsClosed")).toHaveLength(3);
  });

  it("sends nothing on the notification path once it has ended, and stops on end()", async () => {
    const { proxy, url } = await fake();
    let sinkOf: Parameters<NonNullable<ProxyHandlers["notifications"]>>[0] | undefined;
    connect(url, { notifications: (sink) => void (sinkOf = sink) });
    await proxy.until(() => proxy.requests !== undefined);
    proxy.requests!.send(rawAsk(3, 4, "ignored bytes"));
    await waitFor(() => sinkOf !== undefined);
    expect(sinkOf!.send({ method: "notifications/resources/list_changed" })).toBe(true);
    await proxy.until(() => proxy.paths[0]?.messages.length === 1);
    expect(decodeMcpNotificationsAnswer(proxy.paths[0]!.messages[0]!)).toEqual({ variant: "Notification", notification: { method: "notifications/resources/list_changed" } });
    sinkOf!.end();
    await proxy.paths[0]!.closed;
    await waitFor(() => sinkOf!.signal.aborted);
    expect(sinkOf!.send({ method: "notifications/resources/list_changed" })).toBe(false);
  });
});

async function waitFor(check: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await delay(10);
  }
}
