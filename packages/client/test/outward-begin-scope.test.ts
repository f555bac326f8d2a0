// The program's outward MCP on the begin scope (multiplexed.md §10.10–§10.11): before the begin it
// goes on /requests; once a provider has begun tools on /, each exchange is a proxy-opened channel
// (tags 7–10) answered by the same ProviderHandlers, a bare finish is not served, a connection lost
// mid-exchange is an MCP error and never asked again, and the notification channel (tag 11) is
// opened once and reaches every MCP session of the program.
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, mcpProviderHandlers, openContainer, relayToMcp, type ProviderHandlers, type ProxyHandlers } from "../src/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function setUp(): Promise<{ proxy: RunningProxy; providerMcp: string }> {
  // The container the proxy fronts, and a second one whose MCP server stands for the provider's own.
  const app = await startExampleContainer();
  cleanups.push(() => app.close());
  const providers = await startExampleContainer();
  cleanups.push(() => providers.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
  cleanups.push(() => proxy.close());
  return { proxy, providerMcp: `${providers.url.replace(/\/$/, "")}/mcp` };
}

async function program(proxy: RunningProxy): Promise<Client & { streaming: Promise<void> }> {
  const client = new Client({ name: "program", version: "1.0.0" });
  // `streaming` settles once the proxy has answered the session's notification stream (its GET): broadcasts reach it from then on.
  let opened!: () => void;
  const streaming = new Promise<void>((resolve) => (opened = resolve));
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`), {
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      if ((init?.method ?? "GET") === "GET" && response.ok) opened();
      return response;
    },
  });
  await client.connect(transport);
  cleanups.push(() => client.close());
  return Object.assign(client, { streaming });
}

/** A provider holding /requests, recording the kinds asked there. */
function requestsProvider(proxy: RunningProxy, handlers: ProxyHandlers): string[] {
  const kinds: string[] = [];
  const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, handlers, { onEvent: (event) => event.type === "ask" && kinds.push(event.ask.variant) });
  cleanups.push(() => connection.close());
  return kinds;
}

describe("outward MCP on the begin scope", () => {
  it("goes on /requests before the begin and on proxy-opened channels after it, answered by the same handlers", { timeout: 120_000 }, async () => {
    const { proxy, providerMcp } = await setUp();
    const relay = relayToMcp({ url: providerMcp });
    cleanups.push(() => relay.close());
    const kinds = requestsProvider(proxy, relay);
    const agent = await program(proxy);
    const before = await agent.callTool({ name: "greet", arguments: { name: "Before" } });
    expect(before.content).toEqual([{ type: "text", text: "Hello, Before!" }]);
    expect(kinds).toContain("McpCallTool");
    const asked = kinds.length;

    const container = await openContainer(`ws://127.0.0.1:${proxy.port}`, { handlers: mcpProviderHandlers(relay) });
    cleanups.push(() => container.close());
    await container.beginTools({ arguments: { greeting: "Hi" } });
    const after = await agent.callTool({ name: "greet", arguments: { name: "After" } });
    expect(after.content).toEqual([{ type: "text", text: "Hello, After!" }]);
    const listed = await agent.listTools();
    expect(listed.tools.map((tool) => tool.name)).toContain("greet");
    // Nothing more on /requests: the begin scope carried them.
    expect(kinds.slice(asked).filter((kind) => kind.startsWith("Mcp") && kind !== "McpNotifications")).toEqual([]);
  });

  it("openContainer takes the relay's shape too: handlers: relayToMcp(…) answers on the begin scope, as connectProxy's do", { timeout: 120_000 }, async () => {
    const { proxy, providerMcp } = await setUp();
    const relay = relayToMcp({ url: providerMcp });
    cleanups.push(() => relay.close());
    // No provider on /requests at all: whatever is answered is answered on the begin scope.
    const container = await openContainer(`ws://127.0.0.1:${proxy.port}`, { handlers: relay });
    cleanups.push(() => container.close());
    await container.beginTools({ arguments: { greeting: "Hi" } });
    const agent = await program(proxy);
    const called = await agent.callTool({ name: "greet", arguments: { name: "Shape" } });
    expect(called.content).toEqual([{ type: "text", text: "Hello, Shape!" }]);
    expect((await agent.listTools()).tools.map((tool) => tool.name)).toContain("greet");
  });

  it("a channel the provider does not answer is not served; a connection lost mid-exchange is an MCP error and is not asked again", { timeout: 120_000 }, async () => {
    const { proxy } = await setUp();
    let release: (() => void) | undefined;
    const hanging = new Promise<void>((resolve) => (release = resolve));
    const handlers: ProviderHandlers = {
      mcpCallTool: async () => {
        await hanging;
        return undefined;
      },
    };
    const kinds = requestsProvider(proxy, {});
    const container = await openContainer(`ws://127.0.0.1:${proxy.port}`, { handlers });
    await container.beginTools({ arguments: { greeting: "Hi" } });
    const agent = await program(proxy);
    // No mcpListTools handler: a bare finish, which the program sees as an MCP error naming it.
    const notServed = await agent.listTools().then(
      () => undefined,
      (error: { message: string; data?: unknown }) => error,
    );
    expect(notServed?.data).toEqual({ diverge: "NotServed" });
    // The provider's connection goes while a call waits on its channel.
    const waiting = agent.callTool({ name: "greet", arguments: { name: "x" } }).then(
      () => undefined,
      (error: { message: string; data?: unknown }) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    container.frames.close(1000);
    const lost = await waiting;
    release?.();
    expect(lost?.data).toEqual({ diverge: "Lost" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Never asked again, on /requests or anywhere.
    expect(kinds.filter((kind) => kind === "McpCallTool")).toEqual([]);
  });

  it("opens the notification channel once, at the first exchange, and each notification reaches every session of the program", { timeout: 120_000 }, async () => {
    const { proxy, providerMcp } = await setUp();
    const relay = relayToMcp({ url: providerMcp });
    cleanups.push(() => relay.close());
    let notificationChannels = 0;
    const generated = mcpProviderHandlers(relay);
    const container = await openContainer(`ws://127.0.0.1:${proxy.port}`, {
      handlers: {
        ...generated,
        mcpNotifications: (ask, context) => {
          notificationChannels++;
          return generated.mcpNotifications!(ask, context);
        },
      },
    });
    cleanups.push(() => container.close());
    await container.beginTools({ arguments: { greeting: "Hi" } });
    const sessions = [await program(proxy), await program(proxy)];
    const seen: string[][] = [[], []];
    sessions.forEach((session, i) => session.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void seen[i]!.push(String(notification.params.data))));
    // Each session's notification stream opens with its first request.
    await Promise.all(sessions.map((session) => session.listTools()));
    // Waited for, not slept on: both sessions' streams open, and the provider's notification channel.
    await Promise.all(sessions.map((session) => session.streaming));
    await expect.poll(() => notificationChannels, { timeout: 30_000 }).toBe(1);
    await sessions[0]!.callTool({ name: "notify", arguments: { text: "to everyone" } });
    const deadline = Date.now() + 60_000;
    while ((seen[0]!.length === 0 || seen[1]!.length === 0) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(seen[1]).toContain("to everyone");
    expect(seen[0]).toContain("to everyone");
    expect(notificationChannels).toBe(1);
  });
});
