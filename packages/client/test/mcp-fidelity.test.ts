// Issue 13 and issue 12 (defect 3): both relays of the project as faithful MCP servers, every piece real.
// Outward: a program (the MCP SDK's client) → the proxy's /mcp → /requests → relayToMcp → a far MCP
// server (the SDK's). Inward: the provider (openContainer) → the proxy's begin scope → the container's
// MCP server (the same far server). What comes out must be what a direct client of the far server sees.
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ErrorCode, McpError, type ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { startProxy, type RunningProxy } from "@diverge/server";
import { ContainerError, connectProxy, openContainer, relayToMcp, type ContainerConnection } from "../src/index.js";
import { perRequestSignalFetch } from "@diverge/multiplexer";
import { EVERYTHING, EXCHANGES, outcome, SCHEMA_2020_12, startFarServer, viaSdk, type FarServer } from "./fidelity-server.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean, ms = 60_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await delay(10);
  }
}

async function sdkClient(url: string, name = "client"): Promise<Client & { errors: Error[] }> {
  const client = new Client({ name, version: "1.0.0" }) as Client & { errors: Error[] };
  client.errors = [];
  client.onerror = (error) => client.errors.push(error);
  // The test's own clients get a signal per request too, so that what is measured below is the relays.
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: perRequestSignalFetch() }));
  cleanups.push(() => client.close());
  return client;
}

async function far(port = 0): Promise<FarServer> {
  const server = await startFarServer(port);
  cleanups.push(() => server.stop());
  return server;
}

/** Outward: program → proxy → relayToMcp → the far server. */
async function outward(server: FarServer) {
  const proxy: RunningProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  cleanups.push(() => proxy.close());
  const relay = relayToMcp({ url: server.url });
  cleanups.push(() => relay.close());
  const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, relay, { minBackoffMs: 10 });
  cleanups.push(() => connection.close());
  await connection.whenConnected();
  return { proxy, program: (name?: string) => sdkClient(`http://127.0.0.1:${proxy.programPort}/mcp`, name) };
}

/** Inward: the provider's begin scope → proxy → the far server as the container's MCP server. */
async function inward(server: FarServer): Promise<{ proxy: RunningProxy; container: ContainerConnection }> {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: server.port, secretsGate: false });
  cleanups.push(() => proxy.close());
  const container = await openContainer(`ws://127.0.0.1:${proxy.port}/`);
  cleanups.push(async () => container.close());
  await container.beginTools({ arguments: null });
  return { proxy, container };
}

describe("outward relay (program → proxy → relayToMcp → MCP server): a faithful MCP server", () => {
  it("answers every exchange exactly as the far server answers a direct client", async () => {
    const server = await far();
    const { program } = await outward(server);
    const direct = viaSdk(await sdkClient(server.url, "direct"));
    const relayed = viaSdk(await program());
    for (const [what, exchange] of EXCHANGES) expect(await outcome(exchange(relayed)), what).toEqual(await outcome(exchange(direct)));
    // Spot checks that the comparison compared something.
    const tuple = (await relayed.listTools({ cursor: "tools-2" })) as { tools: { inputSchema: unknown }[] };
    expect(tuple.tools[0]!.inputSchema).toEqual(SCHEMA_2020_12);
    expect((await relayed.callTool({ name: "everything", arguments: {} })) as object).toEqual(EVERYTHING);
  });

  it("answers methods the wire does not carry with -32601 and does not advertise them", async () => {
    const server = await far();
    const { program } = await outward(server);
    const client = await program();
    expect(client.getServerCapabilities()).toEqual({ tools: { listChanged: true }, resources: { listChanged: true } });
    for (const method of ["prompts/list", "completion/complete", "logging/setLevel", "resources/templates/list", "resources/subscribe"]) {
      const failure = await outcome(client.request({ method, params: method === "logging/setLevel" ? { level: "info" } : {} } as never, CallToolResultSchema));
      expect(failure, method).toMatchObject({ code: ErrorCode.MethodNotFound });
    }
    await client.ping();
  });

  it("brings each session's progress to exactly that request with its own token, though two sessions use the same token", async () => {
    const server = await far();
    const { program } = await outward(server);
    const [a, b] = [await program("a"), await program("b")];
    const seen: Record<string, string[]> = { a1: [], a2: [], b1: [] };
    const call = (client: Client, key: string, tag: string) =>
      client.request({ method: "tools/call", params: { name: "progress", arguments: { steps: 3, tag, delayMs: 20 } } }, CallToolResultSchema, {
        onprogress: (progress) => seen[key]!.push(`${progress.message} ${progress.progress}/${progress.total}`),
      });
    // Both clients' first request after initialize has id 1, which the SDK uses as the token: the same value in both sessions.
    const results = await Promise.all([call(a, "a1", "A1"), call(b, "b1", "B1"), call(a, "a2", "A2")]);
    expect(results.map((result) => (result.content[0] as { text: string }).text)).toEqual(["A1 done", "B1 done", "A2 done"]);
    await until(() => seen.a1!.length === 3 && seen.b1!.length === 3 && seen.a2!.length === 3, 60_000, "every progress");
    expect(seen).toEqual({ a1: ["A1 1 1/3", "A1 2 2/3", "A1 3 3/3"], a2: ["A2 1 1/3", "A2 2 2/3", "A2 3 3/3"], b1: ["B1 1 1/3", "B1 2 2/3", "B1 3 3/3"] });
    // No progress arrived with a token the SDK did not know (which it reports as an error).
    expect([...a.errors, ...b.errors].map(String).filter((text) => /progress/.test(text))).toEqual([]);
  });

  it("sends list changes, log messages and resource updates to every session, and progress to none of the others", async () => {
    const server = await far();
    const { program } = await outward(server);
    const clients = [await program("one"), await program("two"), await program("three")];
    const got: string[][] = clients.map(() => []);
    clients.forEach((client, index) => {
      client.fallbackNotificationHandler = async (notification) => void got[index]!.push(notification.method);
    });
    // The proxy asks for the notification stream on its first exchange; wait until the far server has a stream open.
    await clients[0]!.listTools();
    await delay(300);
    await clients[1]!.request({ method: "tools/call", params: { name: "progress", arguments: { steps: 2, tag: "p" }, _meta: { progressToken: "tok" } } }, CallToolResultSchema);
    await clients[0]!.callTool({ name: "notify", arguments: {} });
    await until(() => got.every((methods) => methods.length >= 3), 60_000, "notifications in every session");
    for (const methods of got) expect(methods.sort()).toEqual(["notifications/message", "notifications/resources/updated", "notifications/tools/list_changed"]);
    // The SDK's client reports progress whose token it did not make as an error: session two got
    // its progress (token "tok", made by hand), sessions one and three got none.
    const progressErrors = clients.map((client) => client.errors.map(String).filter((text) => /unknown token/.test(text)));
    expect(progressErrors[1]!.length).toBe(2);
    expect(progressErrors[1]![0]).toContain('"progressToken":"tok"');
    expect([progressErrors[0], progressErrors[2]]).toEqual([[], []]);
  });
});

describe("inward relay (provider → proxy's begin scope → container's MCP server): a faithful MCP server", () => {
  it("answers every exchange exactly as the far server answers a direct client", async () => {
    const server = await far();
    const { container } = await inward(server);
    const direct = viaSdk(await sdkClient(server.url, "direct"));
    const relayed = {
      listTools: (params?: object) => container.mcp.listTools(params as never),
      listResources: (params?: object) => container.mcp.listResources(params as never),
      callTool: (params: object) => container.mcp.callTool(params as never),
      readResource: (params: object) => container.mcp.readResource(params as never),
    };
    for (const [what, exchange] of EXCHANGES) expect(await outcome(exchange(relayed)), what).toEqual(await outcome(exchange(direct)));
    expect(((await relayed.listTools({ cursor: "tools-2" })) as { tools: { inputSchema: unknown }[] }).tools[0]!.inputSchema).toEqual(SCHEMA_2020_12);
  });

  it("brings the container's progress back on the notification channel with the provider's own tokens, each request its own", async () => {
    const server = await far();
    const { container } = await inward(server);
    const stream = container.mcp.notifications();
    const progress: ServerNotification[] = [];
    const reading = (async () => {
      for await (const notification of stream) if (notification.method === "notifications/progress") progress.push(notification);
    })();
    await container.mcp.listTools();
    await delay(200);
    const [x, y] = await Promise.all([
      container.mcp.callTool({ name: "progress", arguments: { steps: 2, tag: "X", delayMs: 20 }, _meta: { progressToken: "x" } }),
      container.mcp.callTool({ name: "progress", arguments: { steps: 3, tag: "Y", delayMs: 20 }, _meta: { progressToken: 7 } }),
    ]);
    expect([x._meta, y._meta]).toEqual([{ sawToken: true }, { sawToken: true }]);
    await until(() => progress.length === 5, 60_000, "five progress notifications");
    const byToken = (token: string | number) => progress.filter((n) => (n.params as { progressToken: unknown }).progressToken === token).map((n) => (n.params as { message: string }).message);
    expect(byToken("x")).toEqual(["X 1", "X 2"]);
    expect(byToken(7)).toEqual(["Y 1", "Y 2", "Y 3"]);
    stream.close();
    await reading;
  });
});

describe("inward relay when the container's MCP server restarts (issue 12, defect 3)", () => {
  async function notificationsOf(container: ContainerConnection) {
    const stream = container.mcp.notifications();
    const got: string[] = [];
    let failure: unknown;
    const done = (async () => {
      try {
        for await (const notification of stream) got.push(`${notification.method} ${JSON.stringify(notification.params ?? {})}`);
      } catch (error) {
        failure = error;
      }
    })();
    return { got, done, stream, failure: () => failure };
  }
  const ping = (n: number): ServerNotification => ({ method: "notifications/message", params: { level: "info", data: `ping ${n}` } });

  it("makes a new session after a restart on the same port: exchanges work at once, open and new channels receive", async () => {
    let server = await far();
    const { container, proxy } = await inward(server);
    const open = await notificationsOf(container);
    await container.mcp.listTools();
    await until(() => server.sessionCount() === 1);
    await delay(200);
    await server.notifyAll(ping(1));
    await until(() => open.got.length === 1, 60_000, "ping 1 before the restart");

    await server.stop();
    server = await startFarServer(server.port);
    cleanups.push(() => server.stop());
    // The open channel is moved to a new session: it hears the restarted server.
    await until(() => server.sessionCount() >= 1, 60_000, "a new session on the restarted server");
    await delay(200);
    await server.notifyAll(ping(2));
    await until(() => open.got.length === 2, 60_000, "ping 2 on the channel opened before the restart");
    // Exchanges are answered by the restarted server, not -32603.
    expect((await container.mcp.listTools()).tools.length).toBe(5);
    // A channel opened after the restart hears it too.
    const fresh = await notificationsOf(container);
    await delay(200);
    await server.notifyAll(ping(3));
    await until(() => fresh.got.length === 1 && open.got.length === 3, 60_000, "ping 3 on both channels");
    expect(open.got.map((line) => /ping \d/.exec(line)![0])).toEqual(["ping 1", "ping 2", "ping 3"]);
    void proxy;
  });

  it("answers a request whose session the server forgot (HTTP 404) on a new session, without an error", async () => {
    const server = await far();
    const { container } = await inward(server);
    await container.mcp.listTools();
    server.forget();
    expect((await container.mcp.callTool({ name: "fails", arguments: {} })).isError).toBe(true);
    expect(server.sessionCount()).toBe(1);
  });

  it("ends open notification channels with the error when the server does not come back", async () => {
    const server = await far();
    const { container } = await inward(server);
    const open = await notificationsOf(container);
    await container.mcp.listTools();
    await delay(200);
    await server.stop();
    await open.done;
    expect(open.failure()).toBeInstanceOf(ContainerError);
    expect((open.failure() as ContainerError).detail).toMatchObject({ variant: "Mcp", error: { code: -32603 } });
    expect(((open.failure() as ContainerError).detail as { error: { message: string } }).error.message).toMatch(/could not be reached/);
  });
});

describe("relays under load", () => {
  // Node's fetch (undici) raises the limit of a signal it is given to 1500 and then warns, so the
  // warning itself shows only under heavy load (the bench). What causes it is measured here: the
  // abort listeners alive on any one signal, counted as they are added and removed.
  it("keep the abort listeners on any one signal bounded by the requests in flight, not growing per request", async () => {
    const live = new WeakMap<EventTarget, number>();
    let most = 0;
    const add = EventTarget.prototype.addEventListener;
    const remove = EventTarget.prototype.removeEventListener;
    EventTarget.prototype.addEventListener = function (this: EventTarget, type: string, ...rest: unknown[]) {
      if (type === "abort" && this instanceof AbortSignal) {
        const count = (live.get(this) ?? 0) + 1;
        live.set(this, count);
        most = Math.max(most, count);
      }
      return (add as (...args: unknown[]) => void).call(this, type, ...rest);
    } as typeof add;
    EventTarget.prototype.removeEventListener = function (this: EventTarget, type: string, ...rest: unknown[]) {
      if (type === "abort" && this instanceof AbortSignal && live.has(this)) live.set(this, Math.max(0, live.get(this)! - 1));
      return (remove as (...args: unknown[]) => void).call(this, type, ...rest);
    } as typeof remove;
    cleanups.push(async () => {
      EventTarget.prototype.addEventListener = add;
      EventTarget.prototype.removeEventListener = remove;
    });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on("warning", onWarning);
    cleanups.push(async () => void process.off("warning", onWarning));
    const server = await far();
    const { container } = await inward(server);
    const { program } = await outward(server);
    const client = await program();
    for (let round = 0; round < 30; round++) {
      await Promise.all(Array.from({ length: 10 }, () => container.mcp.callTool({ name: "fails", arguments: {} })));
      await Promise.all(Array.from({ length: 10 }, () => client.callTool({ name: "fails", arguments: {} })));
    }
    // 600 calls, 10 at a time each way: without a signal per request one signal collects hundreds.
    expect(most).toBeLessThan(40);
    expect(warnings.filter((text) => text.startsWith("MaxListenersExceededWarning"))).toEqual([]);
  });
});
