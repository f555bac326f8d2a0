// What a consumer of the provider library meets, over real loopback sockets with a real proxy and
// the real example container: typed errors for every failure (issue 12 defect 13), whenConnected
// after close (14), one notification channel per connection (15), bounded waits that say what they
// waited for, the one-connection rule on `/`, one URL rule, and announced pairs that never throw.
import { createServer, connect as netConnect, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { WebSocketServer, WebSocket } from "ws";
import { decodeClientFrame, encodeServerFrame, encodeToolsBeginResponse } from "@diverge/codec";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type ProxyOptions, type RunningProxy } from "@diverge/server";
import {
  connectProxy,
  ContainerError,
  openContainer,
  ProviderError,
  ProxyUrlError,
  proxyBase,
  type MultiplexedConnection,
  type MultiplexedConnectionEvent,
  type OpenContainerOptions,
} from "../src/index.js";

let app: ExampleContainer;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  app = await startExampleContainer();
});
afterAll(async () => {
  await app.close();
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

async function proxy(options: ProxyOptions = {}): Promise<{ proxy: RunningProxy; log: string[] }> {
  const log: string[] = [];
  const running = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, log: (line) => log.push(line), ...options });
  closers.push(() => running.close());
  return { proxy: running, log };
}

async function container(options: OpenContainerOptions = {}, proxyOptions: ProxyOptions = {}): Promise<{ proxy: RunningProxy; connection: MultiplexedConnection; log: string[]; events: MultiplexedConnectionEvent[] }> {
  const { proxy: running, log } = await proxy(proxyOptions);
  const events: MultiplexedConnectionEvent[] = [];
  const connection = await openContainer(`ws://127.0.0.1:${running.port}`, { ...options, onEvent: (event) => events.push(event) });
  closers.push(() => connection.close());
  return { proxy: running, connection, log, events };
}

/** The settled outcome of `promise`, or "pending" after `ms`. */
async function within<T>(promise: Promise<T>, ms = 3000): Promise<{ value: T } | { error: unknown } | "pending"> {
  return Promise.race([
    promise.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ),
    new Promise<"pending">((resolve) => setTimeout(() => resolve("pending"), ms)),
  ]);
}

async function containerError(promise: Promise<unknown>, ms = 5000): Promise<ContainerError> {
  const outcome = await within(promise, ms);
  if (outcome === "pending") throw new Error("still pending");
  if (!("error" in outcome)) throw new Error("expected a rejection");
  expect(outcome.error).toBeInstanceOf(ContainerError);
  return outcome.error as ContainerError;
}

async function waitFor(condition: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A stand-in proxy for what the real one does not do on demand: it answers Begun, then finishes the begin scope. */
async function scopeFinishingProxy(): Promise<{ url: string }> {
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((resolve) => server.once("listening", resolve));
  server.on("connection", (socket) => {
    socket.on("message", (data: Buffer) => {
      const frame = decodeClientFrame(new Uint8Array(data));
      if (frame.variant !== "Request") return;
      socket.send(encodeServerFrame({ variant: "Response", scope: frame.scope, channel: 0, payload: encodeToolsBeginResponse({ variant: "Begun", tools: [] }) }));
      socket.send(encodeServerFrame({ variant: "ResponseFinish", scope: frame.scope, channel: 0 }));
    });
  });
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        for (const client of server.clients) client.terminate();
        server.close(() => resolve());
      }),
  );
  return { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe("typed errors from every call (issue 12, defect 13)", () => {
  it("beginTools after the connection ended rejects with ContainerError Lost", async () => {
    const { connection } = await container();
    await connection.close();
    const error = await containerError(connection.beginTools({ arguments: { greeting: "Hi" } }));
    expect(error.detail).toEqual({ variant: "Lost", what: "tools::begin" });
  });

  it("info(), feedSecrets() and notifications() after the begin scope's finish are ContainerError Lost", async () => {
    const fake = await scopeFinishingProxy();
    const connection = await openContainer(fake.url);
    closers.push(() => connection.close());
    await connection.beginTools({ arguments: null });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await containerError(connection.info())).detail).toEqual({ variant: "Lost", what: "info" });
    expect((await containerError(connection.feedSecrets({}))).detail.variant).toBe("Lost");
    expect(() => connection.mcp.notifications()).toThrow(ContainerError);
  });

  it("a dropped connection makes a notifications() loop throw Lost instead of ending normally", async () => {
    const { proxy: running, connection } = await container({}, { secretsGate: false });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const stream = connection.mcp.notifications();
    await connection.mcp.callTool({ name: "notify", arguments: { text: "one" } });
    const seen: unknown[] = [];
    const loop = (async () => {
      for await (const notification of stream) {
        seen.push(notification);
        if (seen.length === 1) void running.close();
      }
    })();
    const error = await containerError(loop);
    expect(error.detail).toEqual({ variant: "Lost", what: "notifications" });
    expect(seen).toHaveLength(1);
  });

  it("a second openContainer on a proxy is AlreadyConnected, explained, and the proxy logs the refusal", async () => {
    const { proxy: running, connection, log } = await container();
    await connection.close();
    const error = await containerError(openContainer(`http://127.0.0.1:${running.port}/`));
    expect(error.detail).toEqual({ variant: "AlreadyConnected", what: "openContainer", url: `ws://127.0.0.1:${running.port}/` });
    expect(error.message).toContain("one connection on / in its life");
    expect(log.some((line) => line.includes("refused a second provider connection on /"))).toBe(true);
  });

  it("a proxy that is not there is Unreachable, typed", async () => {
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const error = await containerError(openContainer(`ws://127.0.0.1:${port}`));
    expect(error.detail).toMatchObject({ variant: "Unreachable", url: `ws://127.0.0.1:${port}/` });
  });
});

describe("whenConnected() (issue 12, defect 14)", () => {
  it("rejects with ProviderError Closed once close() is called, for a waiter before and a caller after", async () => {
    const server: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const connection = connectProxy(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, {}, { minBackoffMs: 10, maxBackoffMs: 20 });
    const before = connection.whenConnected();
    await connection.close();
    const early = await within(before);
    const late = await within(connection.whenConnected());
    for (const outcome of [early, late]) {
      expect(outcome).not.toBe("pending");
      const error = (outcome as { error: unknown }).error;
      expect(error).toBeInstanceOf(ProviderError);
      expect((error as ProviderError).detail).toMatchObject({ variant: "Closed" });
    }
  });

  it("takes a timeout and a signal", async () => {
    const server: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const connection = connectProxy(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, {}, { minBackoffMs: 10, maxBackoffMs: 20, onEvent: () => {} });
    closers.push(() => connection.close());
    const timed = await within(connection.whenConnected({ timeoutMs: 100 }));
    expect((timed as { error: ProviderError }).error.detail).toMatchObject({ variant: "TimedOut", timeoutMs: 100 });
    expect((timed as { error: ProviderError }).error.message).toContain("/requests");
    const controller = new AbortController();
    const aborted = connection.whenConnected({ signal: controller.signal });
    controller.abort(new Error("enough"));
    expect(((await within(aborted)) as { error: ProviderError }).error.detail).toMatchObject({ variant: "Aborted" });
  });
});

describe("one notification channel per connection (issue 12, defect 15)", () => {
  it("50 opened and closed streams leave one channel on the proxy, and the channel cap is never reached", async () => {
    const { proxy: running, connection } = await container({}, { secretsGate: false, maxOpenChannels: 8 });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    for (let i = 0; i < 50; i++) connection.mcp.notifications().close();
    const kept = connection.mcp.notifications();
    // Every exchange is still served: 50 leaked channels would be far over the cap of 8.
    expect(await connection.mcp.callTool({ name: "notify", arguments: { text: "once" } })).toBeDefined();
    expect(running.multiplexed.connection!.stats().openChannels).toBeLessThanOrEqual(1);
    const received: unknown[] = [];
    let frames = 0;
    connection.frames.socket.addEventListener("message", () => frames++);
    await connection.mcp.callTool({ name: "notify", arguments: { text: "twice" } });
    for await (const notification of kept) {
      received.push(notification);
      if (received.length === 2) kept.close();
    }
    expect(received.map((n) => (n as { params: { data: string } }).params.data)).toEqual(["once", "twice"]);
    // The call's answer and finish, and the notification once: not once per closed stream.
    expect(frames).toBeLessThanOrEqual(3);
  });

  it("a notifications() stream ends on its signal", async () => {
    const { connection } = await container({}, { secretsGate: false });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const controller = new AbortController();
    const stream = connection.mcp.notifications({ signal: controller.signal });
    const loop = (async () => {
      const seen: unknown[] = [];
      for await (const notification of stream) seen.push(notification);
      return seen;
    })();
    setTimeout(() => controller.abort(), 100);
    expect(await within(loop)).toEqual({ value: [] });
  });

  it("every iterator sees every notification; closing one does not end the others", async () => {
    const { connection } = await container({}, { secretsGate: false });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const a = connection.mcp.notifications();
    const b = connection.mcp.notifications();
    await connection.mcp.callTool({ name: "notify", arguments: { text: "x" } });
    const first = await a[Symbol.asyncIterator]().next();
    expect(first.value).toMatchObject({ params: { data: "x" } });
    a.close();
    await connection.mcp.callTool({ name: "notify", arguments: { text: "y" } });
    const seen: string[] = [];
    for await (const notification of b) {
      seen.push((notification as { params: { data: string } }).params.data);
      if (seen.length === 2) b.close();
    }
    expect(seen).toEqual(["x", "y"]);
  });
});

describe("nothing waits silently", () => {
  it("an MCP exchange before feedSecrets times out saying the secrets gate holds it; an event and a proxy log line say so too", async () => {
    const { connection, events, log } = await container();
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const error = await containerError(connection.mcp.listTools(undefined, { timeoutMs: 300 }));
    expect(error.detail).toMatchObject({ variant: "TimedOut", what: "tools/list", timeoutMs: 300 });
    expect(error.message).toContain("secrets gate");
    expect(events).toContainEqual({ type: "heldForSecrets", what: "tools/list" });
    await waitFor(() => log.some((line) => line.includes("secrets gate holds")));
    // Fed, the same connection goes on.
    await connection.feedSecrets({ API_KEY: "k" });
    expect((await connection.mcp.listTools(undefined, { timeoutMs: 60_000 })).tools.length).toBe(3);
  });

  it("every request takes a signal and rejects with Aborted", async () => {
    const { connection } = await container();
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const controller = new AbortController();
    const call = connection.mcp.callTool({ name: "greet", arguments: { name: "Al" } }, { signal: controller.signal });
    controller.abort();
    expect((await containerError(call)).detail).toMatchObject({ variant: "Aborted", what: "tools/call" });
    const already = await containerError(connection.info({ signal: AbortSignal.abort() }));
    expect(already.detail.variant).toBe("Aborted");
  });

  it("openContainer's dial takes a timeout", async () => {
    // A listener that accepts TCP and never answers the upgrade.
    const server: Server = createServer(() => {});
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(() => new Promise<void>((resolve) => {
      server.close(() => resolve());
    }));
    const sockets = new Set<import("node:net").Socket>();
    server.on("connection", (socket) => {
      sockets.add(socket);
      socket.resume(); // reading, so the end of the dial is seen
    });
    closers.push(async () => sockets.forEach((socket) => socket.destroy()));
    const error = await containerError(openContainer(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, { timeoutMs: 200 }));
    expect(error.detail).toMatchObject({ variant: "TimedOut", what: "openContainer" });
    // The abandoned dial is closed, not left half-open.
    const [dialled] = [...sockets];
    await new Promise((resolve) => (dialled!.destroyed ? resolve(undefined) : dialled!.once("close", resolve)));
  });

  it("info() returns typed front matter, keeping every member", async () => {
    const { connection } = await container();
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const info = await connection.info();
    const secrets: readonly string[] | undefined = info?.frontMatter.secrets;
    const title: string | undefined = info?.frontMatter.title;
    expect(secrets).toEqual(["API_KEY"]);
    expect(title).toBe("Greeter");
    expect(info?.frontMatter.arguments).toMatchObject({ type: "object" });
    expect(info?.rawFrontMatter).toMatchObject({ secrets: ["API_KEY"] });
  });
});

describe("one URL rule for both transports", () => {
  it("accepts the base URL as ws or http, with or without a trailing slash or a prefix", () => {
    expect(proxyBase("ws://127.0.0.1:14979").href).toBe("ws://127.0.0.1:14979/");
    expect(proxyBase("http://127.0.0.1:14979/").href).toBe("ws://127.0.0.1:14979/");
    expect(proxyBase("https://example.test/c/abc").href).toBe("wss://example.test/c/abc/");
  });

  it("refuses a path naming another endpoint, and a scheme that is not a WebSocket or HTTP one", async () => {
    const { proxy: running } = await proxy();
    const url = `ws://127.0.0.1:${running.port}/requests`;
    await expect(openContainer(url)).rejects.toMatchObject({ name: "ProxyUrlError", detail: { variant: "Endpoint", endpoint: "requests", base: `ws://127.0.0.1:${running.port}/` } });
    expect(() => connectProxy(`http://127.0.0.1:${running.port}/mcp/list-tools/3`, {})).toThrow(ProxyUrlError);
    expect(() => connectProxy("ftp://127.0.0.1/", {})).toThrow(/not ws, wss, http or https/);
    // The refused dial took nothing: `/requests` is still free for a provider.
    const paths = connectProxy(`http://127.0.0.1:${running.port}`, {});
    closers.push(() => paths.close());
    await paths.whenConnected({ timeoutMs: 60_000 });
    const multiplexed = await openContainer(`http://127.0.0.1:${running.port}`);
    closers.push(() => multiplexed.close());
    await multiplexed.beginTools({ arguments: { greeting: "Hi" } });
  });
});

describe("announced connections never crash the provider", () => {
  it("the database option pipes each connection, and an unreachable database is a pairFailed event with the id", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const { proxy: running, connection, events } = await container({ database: `postgres://u@127.0.0.1:${deadPort}/db` }, { secretsGate: false });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const driver = netConnect({ host: "127.0.0.1", port: running.multiplexed.pgPort });
    driver.on("error", () => {});
    driver.write("hello");
    await new Promise((resolve) => driver.once("close", resolve));
    await waitFor(() => events.some((event) => event.type === "pairFailed"));
    const failed = events.find((event) => event.type === "pairFailed") as Extract<MultiplexedConnectionEvent, { type: "pairFailed" }>;
    const announced = events.find((event) => event.type === "announced") as Extract<MultiplexedConnectionEvent, { type: "announced" }>;
    expect(failed).toMatchObject({ kind: "postgres", id: announced.id });
    expect(failed.error.message).toContain("ECONNREFUSED");
  });

  it("an announced connection with no handler is a declined event", async () => {
    const { proxy: running, connection, events } = await container({}, { secretsGate: false });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const program = new WebSocket(`ws://127.0.0.1:${running.programPort}/daemon`);
    program.on("error", () => {});
    await new Promise((resolve) => program.once("close", resolve));
    await waitFor(() => events.some((event) => event.type === "declined"));
    expect(events.find((event) => event.type === "declined")).toMatchObject({ kind: "daemon", reason: "no onDaemon handler" });
  });
});
