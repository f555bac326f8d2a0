// The HTTP layer of `--serve-agent` (the A2A bridge) as an outside client meets it, over real
// sockets, against the real proxy and the example agent, on both transports: the Host/Origin check
// (loopback by default, widened by the guard and by --allow-host/--allow-origin), the bound on request
// bodies (the card's path too), the bound on what a slow message/stream client leaves unread, and a
// message over the proxy's message limit refused alone while the bridge goes on.
import { spawn, type ChildProcess } from "node:child_process";
import { request as httpRequest } from "node:http";
import { connect as tcpConnect, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { startExampleAgent, exampleAgentRoot, type ExampleAgent } from "@diverge/example-agent";
import { beginPathsAgent, ContainerError, openContainer, serveAgentA2a, type Agent, type ServeAgentOptions, type ServingAgent } from "../src/index.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

type Transport = "multiplexed" | "paths";

async function proxyAndProgram(transport: Transport, maxMessageBytes?: number): Promise<{ proxy: RunningProxy; program: ExampleAgent; url: string }> {
  let proxy: RunningProxy | undefined;
  const program = await startExampleAgent({ port: 0, mcpUrl: () => `http://127.0.0.1:${proxy!.programPort}/mcp` });
  closers.push(() => program.close());
  // No path carries a secrets feed: on paths the proxy runs without the gate.
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: program.port, root: exampleAgentRoot, secretsGate: transport === "paths" ? false : undefined, maxMessageBytes, log: () => {} });
  closers.push(() => proxy!.close());
  return { proxy, program, url: `ws://127.0.0.1:${proxy.port}/` };
}

/** The agent begun on `transport`, the provider told the proxy's message limit as the proxy was. */
async function begin(transport: Transport, url: string, maxMessageBytes?: number): Promise<Agent> {
  if (transport === "multiplexed") {
    const connection = await openContainer(url, { maxMessageBytes });
    closers.push(() => connection.close());
    const agent = await connection.beginAgent({ arguments: {} });
    await agent.feedSecrets({ API_KEY: "k" });
    return agent;
  }
  const paths = await beginPathsAgent(url, { arguments: {} }, { maxMessageBytes });
  closers.push(() => paths.close());
  return paths;
}

async function serve(transport: Transport, options: ServeAgentOptions & { proxyMaxMessageBytes?: number } = {}): Promise<{ serving: ServingAgent; program: ExampleAgent; agent: Agent }> {
  const { program, url } = await proxyAndProgram(transport, options.proxyMaxMessageBytes);
  const agent = await begin(transport, url, options.proxyMaxMessageBytes);
  const serving = await serveAgentA2a(agent, { port: 0, idleMs: 500, ...options });
  closers.push(() => serving.close());
  return { serving, program, agent };
}

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

/** One raw HTTP request (any Host, any body); the answer read whole. */
function raw(url: string, options: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer }): Promise<Answer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const sent = httpRequest({ host: target.hostname, port: target.port, method: options.method ?? "POST", path: options.path ?? "/", headers: { "content-type": "application/json", ...options.headers } }, (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (text += chunk));
      response.on("end", () => resolve({ status: response.statusCode!, headers: response.headers, text }));
    });
    // A refusal may close the connection while the body is still going: the answer came first.
    sent.on("error", reject);
    sent.end(options.body);
  });
}

const sendMessage = (text: string, id: unknown = 1, method = "message/send") =>
  JSON.stringify({ jsonrpc: "2.0", id, method, params: { message: { kind: "message", role: "user", messageId: crypto.randomUUID(), parts: [{ kind: "text", text }] } } });

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(["multiplexed", "paths"] as const)("the A2A bridge's HTTP layer on %s", (transport) => {
  it("refuses a foreign Host or Origin with 403 before anything reaches the agent; the guard widens them", async () => {
    const { serving, program } = await serve(transport, { guard: { hosts: ["agent.example"], origins: ["https://app.example"] } });
    const port = new URL(serving.url).port;
    const refusals = [
      await raw(serving.url, { headers: { host: "evil.example" }, body: sendMessage("rebound") }),
      await raw(serving.url, { headers: { host: `127.0.0.1:${port}`, origin: "http://evil.example" }, body: sendMessage("cross-site") }),
      await raw(serving.url, { headers: { host: `agent.example.evil:${port}` }, body: sendMessage("lookalike") }),
      await raw(serving.url, { method: "GET", path: "/.well-known/agent-card.json", headers: { host: `evil.example:${port}` } }),
    ];
    for (const refusal of refusals) {
      expect(refusal.status).toBe(403);
      expect(JSON.parse(refusal.text)).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringMatching(/^Invalid (Host|Origin): /) } });
    }
    expect(program.runs).toBe(0);
    // Loopback names pass, and so do the allowed ones.
    expect((await raw(serving.url, { method: "GET", path: "/.well-known/agent-card.json", headers: { host: `localhost:${port}`, origin: "http://localhost:3000" } })).status).toBe(200);
    const allowed = await raw(serving.url, { headers: { host: `agent.example:${port}`, origin: "https://app.example" }, body: sendMessage("through the allowed names") });
    expect(allowed.status).toBe(200);
    expect(JSON.parse(allowed.text)).toMatchObject({ result: { kind: "task", status: { state: "input-required" } } });
    expect(program.runs).toBe(1);
  }, 120_000);

  it("bounds every request body: 413 with a JSON-RPC error naming the limit, read no further, the card's path too", async () => {
    const limit = 64 * 1024;
    const { serving, program } = await serve(transport, { maxBodyBytes: limit });
    const tooLarge = (answer: Answer) => {
      expect(answer.status).toBe(413);
      expect(answer.headers.connection).toBe("close");
      const error = (JSON.parse(answer.text) as { error: { code: number; message: string } }).error;
      expect(error.code).toBe(-32600);
      expect(error.message).toContain(`${limit} bytes`);
    };
    // Chunked (no length said): refused once it passes the limit.
    tooLarge(await raw(serving.url, { headers: { "transfer-encoding": "chunked" }, body: sendMessage("x".repeat(limit)) }));
    // A Content-Length over the limit is refused before any of the body is sent.
    tooLarge(await headOnly(serving.url, "/", "POST", 1024 * 1024 * 1024));
    // The card's path reads no unbounded body either.
    tooLarge(await raw(serving.url, { method: "GET", path: "/.well-known/agent-card.json", headers: { "transfer-encoding": "chunked" }, body: Buffer.alloc(limit + 1, 0x20) }));
    tooLarge(await headOnly(serving.url, "/.well-known/agent-card.json", "GET", 1024 * 1024 * 1024));
    expect(program.runs).toBe(0);
    // A body within the limit is served as before.
    const served = await raw(serving.url, { body: sendMessage("within the limit") });
    expect(JSON.parse(served.text)).toMatchObject({ result: { status: { state: "input-required" } } });
  }, 120_000);

  it("a message/stream client that stops reading holds at most the bound; its stream ends with an error saying why", async () => {
    const limit = 256 * 1024;
    const lines: string[] = [];
    const { serving } = await serve(transport, { streamBufferBytes: limit, log: (line) => lines.push(line) });
    const target = new URL(serving.url);
    // A reply of 60 000 words, one artifact event each: far more than the socket buffers take.
    const body = sendMessage("w ".repeat(60_000), 7, "message/stream");
    const socket: Socket = tcpConnect(Number(target.port), target.hostname);
    closers.push(async () => void socket.destroy());
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (received += chunk));
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.write(`POST / HTTP/1.1\r\nHost: ${target.host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    await waitFor(() => received.includes("\r\n\r\n"), "the stream's head");
    expect(received).toMatch(/^HTTP\/1\.1 200/);
    // The client stops reading: the bridge's unread bytes grow to the bound and the stream is ended.
    socket.pause();
    await waitFor(() => lines.some((line) => line.includes("read too slowly")), "the bridge to end the slow stream", 120_000);
    expect(serving.peakStreamBytesWaiting).toBeGreaterThan(limit);
    // At most the bound and one event more: the largest here (the task with the message in its
    // history, the final status with the whole reply) is about the message's size.
    expect(serving.peakStreamBytesWaiting).toBeLessThanOrEqual(limit + Buffer.byteLength(body) + 16 * 1024);
    expect(serving.streamBytesWaiting).toBe(0);
    socket.resume();
    await closed;
    // The last event is the error, then the chunked body's end (each event is one chunk).
    const last = received.slice(received.lastIndexOf("event: error"));
    expect(last).toMatch(/^event: error\ndata: .*\n\n\r\n0\r\n\r\n$/);
    const error = JSON.parse(/data: (.*)/.exec(last)![1]!) as { id: unknown; error: { message: string } };
    expect(error.id).toBe(7);
    expect(error.error.message).toMatch(new RegExp(`^the A2A client read too slowly: \\d+ bytes waiting, limit ${limit}$`));
    // The bridge goes on serving.
    const next = await raw(serving.url, { body: sendMessage("after the slow one") });
    expect(JSON.parse(next.text)).toMatchObject({ result: { status: { state: "input-required" } } });
  }, 180_000);

  it("a message over the proxy's message limit is refused alone (a JSON-RPC error naming the limit); the next one is served", async () => {
    const limit = 256 * 1024;
    const { serving, program, agent } = await serve(transport, { proxyMaxMessageBytes: limit });
    for (const method of ["message/send", "message/stream"]) {
      const refused = await raw(serving.url, { body: sendMessage("y".repeat(limit + 1), 3, method) });
      expect(refused.status).toBe(200);
      const error = (JSON.parse(refused.text) as { id: unknown; error: { code: number; message: string } });
      expect(error.id).toBe(3);
      expect(error.error.code).toBe(-32600);
      expect(error.error.message).toMatch(new RegExp(`^the message is \\d+ bytes as the proxy would receive it, larger than its message limit of ${limit} bytes`));
    }
    expect(program.runs).toBe(0);
    // The same connection goes on: the next message is taken and answered.
    const served = await raw(serving.url, { body: sendMessage("the next one") });
    expect(JSON.parse(served.text)).toMatchObject({ result: { status: { state: "input-required", message: { parts: [{ kind: "text", text: "You said: the next one" }] } } } });
    // The Agent itself refuses such a message, unsent, with a typed error; the connection is unharmed.
    const problem = await agent.enqueue("big", "z".repeat(limit + 1)).catch((error: unknown) => error);
    expect(problem).toBeInstanceOf(ContainerError);
    expect((problem as ContainerError).detail).toMatchObject({ variant: "TooLarge", what: "enqueue", limit });
    expect((problem as ContainerError).detail).toHaveProperty("bytes", agent.enqueueBytes("big", "z".repeat(limit + 1)));
    expect(await agent.enqueue("small", "still here")).toBe("delivered");
  }, 120_000);

  it("diverge connect --serve-agent checks Host and Origin; --allow-host and --allow-origin widen them", async () => {
    const { url } = await proxyAndProgram(transport);
    const child: ChildProcess = spawn(
      process.execPath,
      [cli, "connect", "--proxy", url, "--transport", transport, "--serve-agent", "127.0.0.1:0", "--allow-host", "agent.example", "--allow-origin", "https://app.example", "--arguments", "{}", ...(transport === "multiplexed" ? ["--secret-env", "API_KEY"] : [])],
      { env: { ...process.env, API_KEY: "k" }, stdio: ["pipe", "pipe", "pipe"] },
    );
    const closed = new Promise((resolve) => child.once("close", resolve));
    closers.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await closed;
    });
    let stderr = "";
    child.stderr!.on("data", (data: Buffer) => (stderr += data.toString()));
    await waitFor(() => /serving the agent over A2A at (\S+) /.test(stderr), "the --serve-agent line");
    const served = /serving the agent over A2A at (\S+) /.exec(stderr)![1]!;
    const port = new URL(served).port;
    const card = (headers: Record<string, string>) => raw(served, { method: "GET", path: "/.well-known/agent-card.json", headers });
    expect((await card({ host: `evil.example:${port}` })).status).toBe(403);
    expect((await card({ host: `127.0.0.1:${port}`, origin: "https://evil.example" })).status).toBe(403);
    expect((await card({ host: `agent.example:${port}`, origin: "https://app.example" })).status).toBe(200);
    expect((await card({ host: `127.0.0.1:${port}` })).status).toBe(200);
    child.kill("SIGINT");
    expect(await closed).toBe(0);
  }, 120_000);
});

/** Sends only the request head, declaring `length` bytes of body, and reads the answer. */
function headOnly(url: string, path: string, method: string, length: number): Promise<Answer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const sent = httpRequest({ host: target.hostname, port: target.port, method, path, headers: { "content-type": "application/json", "content-length": String(length) } }, (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (text += chunk));
      response.on("end", () => {
        resolve({ status: response.statusCode!, headers: response.headers, text });
        sent.destroy();
      });
    });
    sent.on("error", reject);
    sent.flushHeaders();
  });
}
