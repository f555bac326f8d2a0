// The program-facing side: a real MCP SDK client, inside the container, talks to the proxy's `/mcp`;
// each request becomes an ask on `/requests`, answered here by a hand-written provider.
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { encodeMcpCallToolAnswer, encodeMcpListResourcesAnswer, encodeMcpListToolsAnswer, encodeMcpNotificationsAnswer, encodeMcpReadResourceAnswer, type RequestsAsk } from "@diverge/codec";
import type { RunningProxy } from "../src/index.js";
import { answerPath, delay, openWs, pathOf, rejection, RequestsLine, testProxy } from "./paths-helpers.js";

let proxy: RunningProxy | undefined;
const clients: Client[] = [];
const lines: RequestsLine[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => {});
  for (const line of lines.splice(0)) line.socket.terminate();
  await proxy?.close();
  proxy = undefined;
});

async function program(p: RunningProxy): Promise<Client> {
  const client = new Client({ name: "program", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${p.programPort}/mcp`)));
  clients.push(client);
  return client;
}

async function setup() {
  proxy = await testProxy();
  const requests = await RequestsLine.open(proxy.port);
  lines.push(requests);
  return { p: proxy, requests };
}

describe("the program's MCP endpoint", () => {
  it("serves initialize itself, and turns tools/list, resources/list, tools/call and resources/read into asks", async () => {
    const { p, requests } = await setup();
    const client = await program(p);
    expect(client.getServerVersion()).toEqual({ name: "diverge-proxy", version: "2.3.0" });
    // initialize is not an exchange: nothing is asked for it.
    await delay(50);
    expect(requests.asks).toEqual([]);

    const tools = client.listTools();
    const a = await requests.nextExchange();
    expect(a.variant).toBe("McpListTools");
    await answerPath(p.port, pathOf(a), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [{ name: "shout", inputSchema: { type: "object" } }] } }));
    expect((await tools).tools.map((tool) => tool.name)).toEqual(["shout"]);

    const resources = client.listResources({ cursor: "page-2" });
    const b = await requests.nextExchange();
    expect(b.variant === "McpListResources" && b.params).toEqual({ cursor: "page-2" });
    await answerPath(p.port, pathOf(b), encodeMcpListResourcesAnswer({ variant: "Result", result: { resources: [{ uri: "note://1", name: "one" }] } }));
    expect((await resources).resources).toEqual([{ uri: "note://1", name: "one" }]);

    const call = client.callTool({ name: "shout", arguments: { text: "hi" } });
    const c = await requests.nextExchange();
    expect(c.variant === "McpCallTool" && c.params).toMatchObject({ name: "shout", arguments: { text: "hi" } });
    await answerPath(p.port, pathOf(c), encodeMcpCallToolAnswer({ variant: "Result", result: { content: [{ type: "text", text: "HI" }] } }));
    expect((await call).content).toEqual([{ type: "text", text: "HI" }]);

    const read = client.readResource({ uri: "note://1" });
    const d = await requests.nextExchange();
    expect(d.variant === "McpReadResource" && d.params).toMatchObject({ uri: "note://1" });
    await answerPath(p.port, pathOf(d), encodeMcpReadResourceAnswer({ variant: "Result", result: { contents: [{ uri: "note://1", text: "first note" }] } }));
    expect((await read).contents).toEqual([{ uri: "note://1", text: "first note" }]);
  });

  it("gives the program the provider's MCP error with its code, message and data", async () => {
    const { p, requests } = await setup();
    const client = await program(p);
    const call = rejection(client.callTool({ name: "missing" }));
    const ask = await requests.nextExchange();
    await answerPath(p.port, pathOf(ask), encodeMcpCallToolAnswer({ variant: "Error", error: { code: -32602, message: "Tool missing not found", data: { name: "missing" } } }));
    const error = (await call) as McpError;
    expect(error).toBeInstanceOf(McpError);
    expect(error.code).toBe(-32602);
    expect(error.message).toBe("MCP error -32602: Tool missing not found");
    expect(error.data).toEqual({ name: "missing" });
  });

  it("turns not served, an unreadable answer and an abrupt end into one outcome each", async () => {
    const { p, requests } = await setup();
    const client = await program(p);
    const declined = rejection(client.listTools());
    const one = await requests.nextExchange();
    await answerPath(p.port, pathOf(one));
    const notServed = (await declined) as McpError;
    expect(notServed.code).toBe(-32603);
    expect(notServed.data).toEqual({ diverge: "NotServed" });

    const garbled = rejection(client.readResource({ uri: "x:y" }));
    const two = await requests.nextExchange();
    await answerPath(p.port, pathOf(two), new Uint8Array([9]));
    const unreadable = (await garbled) as McpError;
    expect(unreadable.code).toBe(-32603);
    expect(unreadable.message).toContain("unknown mcp answer frame tag 9");
    expect(unreadable.data).toEqual({ diverge: "UnreadableAnswer" });

    // An abrupt end is asked again, so the program sees only the eventual answer.
    const retried = client.listResources();
    const three = await requests.nextExchange();
    (await openWs(p.port, pathOf(three))).terminate();
    const four = await requests.nextExchange();
    expect(four.variant).toBe("McpListResources");
    await answerPath(p.port, pathOf(four), encodeMcpListResourcesAnswer({ variant: "Result", result: { resources: [] } }));
    expect((await retried).resources).toEqual([]);
  });

  it("relays the provider's notifications to every session", async () => {
    const { p, requests } = await setup();
    const first = await program(p);
    const second = await program(p);
    const heard: [string, unknown][] = [];
    first.fallbackNotificationHandler = async (notification) => void heard.push(["first", notification]);
    second.fallbackNotificationHandler = async (notification) => void heard.push(["second", notification]);
    // The first exchange makes the proxy ask for notifications.
    const tools = first.listTools();
    const skipped: RequestsAsk[] = [];
    const exchange = await requests.nextExchange(skipped);
    await answerPath(p.port, pathOf(exchange), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
    await tools;
    const ask = skipped[0] ?? (await requests.next());
    expect(ask.variant).toBe("McpNotifications");
    const stream = await openWs(p.port, pathOf(ask));
    // Each session's GET stream opens in its own time; a notification sent before is lost (no
    // replay), so keep sending until both have heard one.
    for (let n = 0; n < 100 && !(heard.some(([who]) => who === "first") && heard.some(([who]) => who === "second")); n++) {
      stream.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/tools/list_changed" } }));
      await delay(20);
    }
    expect(heard.find(([who]) => who === "first")?.[1]).toEqual({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
    expect(heard.find(([who]) => who === "second")?.[1]).toEqual({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
    const before = heard.length;
    stream.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/message", params: { level: "warning", data: "disk low" } } }));
    await delay(100);
    const later = heard.slice(before).map(([who, n]) => [who, (n as { params?: unknown }).params] as const);
    expect(later.sort(([x], [y]) => x.localeCompare(y))).toEqual([
      ["first", { level: "warning", data: "disk low" }],
      ["second", { level: "warning", data: "disk low" }],
    ]);
    stream.close();
  });

  it("answers HTTP without a session with 400 and an unknown session with 404", async () => {
    const { p } = await setup();
    const url = `http://127.0.0.1:${p.programPort}/mcp`;
    const noSession = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }) });
    expect(noSession.status).toBe(400);
    const unknown = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": "nope" }, body: "{}" });
    expect(unknown.status).toBe(404);
    const notJson = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    expect(notJson.status).toBe(400);
  });

  it("refuses a request body over the message limit with 413", async () => {
    proxy = await testProxy({ maxMessageBytes: 2048 });
    const url = `http://127.0.0.1:${proxy.programPort}/mcp`;
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { padding: "x".repeat(4096) } });
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body });
    expect(response.status).toBe(413);
  });
});
