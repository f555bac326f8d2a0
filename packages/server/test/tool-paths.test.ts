// The paths transport's `/tool/*` (paths.md §4) against a real proxy and the example container's real
// MCP server: every exchange answered with exactly one message (the result, the server's own error
// verbatim, -32602 for params that do not parse, -32603 when the server cannot be reached or the
// answer is too large), notifications only after the opening, and one inward MCP client shared with
// the begin scope.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { decodeMcpCallToolAnswer, decodeMcpListToolsAnswer, decodeMcpNotificationsAnswer, encodeToolCallToolRequest, encodeToolListToolsRequest } from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type ProxyOptions, type RunningProxy } from "../src/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function fixture(options: ProxyOptions = {}, appPort?: number): Promise<{ app: ExampleContainer | undefined; proxy: RunningProxy }> {
  const app = appPort === undefined ? await startExampleContainer() : undefined;
  if (app) cleanups.push(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: appPort ?? app!.port, root: exampleRoot, secretsGate: false, log: () => {}, ...options });
  cleanups.push(() => proxy.close());
  return { app, proxy };
}

interface Opened {
  readonly socket: WebSocket;
  readonly messages: Uint8Array[];
  /** Resolves with the close: `clean` when a Close frame came. */
  readonly closed: Promise<{ code: number; clean: boolean }>;
  next(ms?: number): Promise<Uint8Array>;
}

async function open(proxy: RunningProxy, path: string): Promise<Opened> {
  const socket = new WebSocket(`ws://127.0.0.1:${proxy.port}${path}`);
  const messages: Uint8Array[] = [];
  const waiters: (() => void)[] = [];
  socket.on("message", (data: Buffer, isBinary) => {
    if (!isBinary) return;
    messages.push(new Uint8Array(data));
    for (const wake of waiters.splice(0)) wake();
  });
  socket.on("error", () => {});
  const closed = new Promise<{ code: number; clean: boolean }>((resolve) => socket.on("close", (code) => resolve({ code, clean: code !== 1006 })));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("unexpected-response", (_request, response) => reject(new Error(`HTTP ${response.statusCode}`)));
  });
  let taken = 0;
  return {
    socket,
    messages,
    closed,
    async next(ms = 60_000) {
      const deadline = Date.now() + ms;
      while (messages.length <= taken) {
        if (Date.now() > deadline) throw new Error(`no message on ${path}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return messages[taken++]!;
    },
  };
}

/** Opens `path`, sends `bytes`, and returns every message before the proxy's close. */
async function exchange(proxy: RunningProxy, path: string, bytes: Uint8Array | string): Promise<{ messages: Uint8Array[]; clean: boolean }> {
  const opened = await open(proxy, path);
  opened.socket.send(bytes, { binary: typeof bytes !== "string" });
  const { clean } = await opened.closed;
  return { messages: opened.messages, clean };
}

async function direct(app: ExampleContainer): Promise<Client> {
  const client = new Client({ name: "direct", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${app.url.replace(/\/$/, "")}/mcp`)));
  cleanups.push(() => client.close());
  return client;
}

describe("/tool/*", () => {
  it("answers tools/list and tools/call with exactly one message, then closes cleanly; the server's errors verbatim", { timeout: 120_000 }, async () => {
    const { app, proxy } = await fixture();
    const listed = await exchange(proxy, "/tool/list-tools", encodeToolListToolsRequest({ params: null }));
    expect(listed.clean).toBe(true);
    expect(listed.messages).toHaveLength(1);
    const tools = decodeMcpListToolsAnswer(listed.messages[0]!, { check: checkMcp });
    expect(tools).toEqual({ variant: "Result", result: await (await direct(app!)).listTools() });

    const called = await exchange(proxy, "/tool/call-tool", encodeToolCallToolRequest({ params: { name: "greet", arguments: { name: "Ada" } } }));
    expect(called.messages).toHaveLength(1);
    expect(decodeMcpCallToolAnswer(called.messages[0]!, { check: checkMcp })).toEqual({ variant: "Result", result: { content: [{ type: "text", text: "Hello, Ada!" }] } });

    // Whatever the server says to a tool it does not have (an error, or an isError result), it arrives as itself.
    const client = await direct(app!);
    let expected: unknown;
    try {
      expected = { variant: "Result", result: await client.callTool({ name: "nope", arguments: {} }) };
    } catch (problem) {
      const error = problem as { code: number; message: string; data?: unknown };
      expected = { variant: "Error", error: { code: error.code, message: error.message.replace(/^MCP error -?\d+: /, ""), ...(error.data === undefined ? {} : { data: error.data }) } };
    }
    const unknown = await exchange(proxy, "/tool/call-tool", encodeToolCallToolRequest({ params: { name: "nope", arguments: {} } }));
    expect(decodeMcpCallToolAnswer(unknown.messages[0]!, { check: checkMcp })).toEqual(expected);
  });

  it("answers params that do not parse with -32602, ignores a text message, and is never silent", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    const bad = await exchange(proxy, "/tool/call-tool", new TextEncoder().encode("{not json"));
    expect(bad.messages).toHaveLength(1);
    const answer = decodeMcpCallToolAnswer(bad.messages[0]!, { check: checkMcp });
    expect(answer.variant).toBe("Error");
    expect((answer as { error: { code: number } }).error.code).toBe(-32602);

    const opened = await open(proxy, "/tool/list-tools");
    opened.socket.send("text is ignored");
    opened.socket.send(encodeToolListToolsRequest({ params: null }));
    await opened.closed;
    expect(opened.messages).toHaveLength(1);
    expect(decodeMcpListToolsAnswer(opened.messages[0]!, { check: checkMcp }).variant).toBe("Result");
  });

  it("answers -32603 with the reason when the container's server cannot be reached, and notifications with one error then the close", { timeout: 120_000 }, async () => {
    const gone = createServer();
    await new Promise<void>((resolve) => gone.listen(0, "127.0.0.1", resolve));
    const port = (gone.address() as AddressInfo).port;
    await new Promise<void>((resolve) => gone.close(() => resolve()));
    const { proxy } = await fixture({}, port);
    const listed = await exchange(proxy, "/tool/list-tools", encodeToolListToolsRequest({ params: null }));
    const answer = decodeMcpListToolsAnswer(listed.messages[0]!, { check: checkMcp }) as { variant: string; error: { code: number; message: string } };
    expect(answer.variant).toBe("Error");
    expect(answer.error.code).toBe(-32603);
    expect(answer.error.message).toContain(`127.0.0.1:${port}`);

    const notifications = await open(proxy, "/tool/notifications");
    const { clean } = await notifications.closed;
    expect(clean).toBe(true);
    expect(notifications.messages).toHaveLength(1);
    expect(decodeMcpNotificationsAnswer(notifications.messages[0]!, { check: checkMcp }).variant).toBe("Error");
  });

  it("replaces an answer larger than the message limit with -32603 saying so", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture({ maxMessageBytes: 300 });
    const listed = await exchange(proxy, "/tool/list-tools", encodeToolListToolsRequest({ params: null }));
    const answer = decodeMcpListToolsAnswer(listed.messages[0]!, { check: checkMcp }) as { variant: string; error: { code: number; message: string } };
    expect(answer).toMatchObject({ variant: "Error", error: { code: -32603 } });
    expect(answer.error.message).toContain("larger than the message limit of 300");
  });

  it("delivers only the notifications sent after the opening, until the provider closes; one inward client for / and /tool/*", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    // A notification before the opening is not delivered.
    await exchange(proxy, "/tool/call-tool", encodeToolCallToolRequest({ params: { name: "notify", arguments: { text: "before" } } }));
    const stream = await open(proxy, "/tool/notifications");
    // The subscription is made once the path is open; give it the moment it takes.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await exchange(proxy, "/tool/call-tool", encodeToolCallToolRequest({ params: { name: "notify", arguments: { text: "after" } } }));
    const first = decodeMcpNotificationsAnswer(await stream.next(), { check: checkMcp }) as { variant: string; notification: { method: string; params: { data: string } } };
    expect(first.variant).toBe("Notification");
    expect(first.notification.params.data).toBe("after");
    stream.socket.close();
    await stream.closed;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(proxy.inward.subscriptions).toBe(0);
    expect(proxy.inward.sessionsMade).toBe(1);
  });

  it("is refused at once, naming the gate and --no-secrets-gate, while the gate is shut and no provider is begun on / to feed the secrets", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture({ secretsGate: true });
    const { messages, clean } = await exchange(proxy, "/tool/list-tools", encodeToolListToolsRequest({ params: null }));
    expect(clean).toBe(true);
    const answer = decodeMcpListToolsAnswer(messages[0]!) as { variant: string; error: { code: number; message: string; data: unknown } };
    expect(answer.variant).toBe("Error");
    expect(answer.error.code).toBe(-32603);
    expect(answer.error.message).toContain("secrets gate");
    expect(answer.error.message).toContain("--no-secrets-gate");
    expect(answer.error.data).toEqual({ reason: "secretsGate" });
    // Nothing is held for nobody.
    expect(proxy.gate.held).toBe(0);
    // The notification path too: one error and the end.
    const stream = await open(proxy, "/tool/notifications");
    await stream.closed;
    expect((decodeMcpNotificationsAnswer(stream.messages[0]!) as { variant: string }).variant).toBe("Error");
    // Once the gate is open, /tool/* is served.
    proxy.gate.open();
    const served = await exchange(proxy, "/tool/list-tools", encodeToolListToolsRequest({ params: null }));
    expect((decodeMcpListToolsAnswer(served.messages[0]!) as { variant: string }).variant).toBe("Result");
  });
});
