// Every HTTP server of the proxy against an outside client, over raw TCP: the provider port checks
// no Host (the provider names the container as it reaches it) but refuses a browser page's Origin
// unless allowed; no body is read without a bound on either port — a body over its limit is answered
// at once and the connection ends, nothing more of it read.
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { ProxyOptions, RunningProxy } from "../src/index.js";
import { testProxy } from "./paths-helpers.js";

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function proxyWith(options: ProxyOptions = {}): Promise<RunningProxy> {
  const proxy = await testProxy(options);
  cleanups.push(() => proxy.close());
  return proxy;
}

/** A raw TCP client: what it has received, and whether the server has ended the connection. */
interface RawClient {
  readonly socket: Socket;
  received(): string;
  readonly closed: Promise<void>;
  isClosed(): boolean;
}

function rawClient(port: number): RawClient {
  const socket = connect(port, "127.0.0.1");
  cleanups.push(() => void socket.destroy());
  let text = "";
  let closed = false;
  socket.setEncoding("latin1");
  socket.on("data", (chunk: string) => (text += chunk));
  // A reset while the client still writes is the server ending it too.
  socket.on("error", () => {});
  const ended = new Promise<void>((resolve) => socket.once("close", () => ((closed = true), resolve())));
  return { socket, received: () => text, closed: ended, isClosed: () => closed };
}

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The status of a WebSocket handshake on `/requests` with these extra headers (101 when it opens). */
async function handshake(port: number, headers: Record<string, string>): Promise<number> {
  const client = rawClient(port);
  const head = { host: `127.0.0.1:${port}`, connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": randomBytes(16).toString("base64"), ...headers };
  client.socket.write(`GET /requests HTTP/1.1\r\n${Object.entries(head).map(([name, value]) => `${name}: ${value}\r\n`).join("")}\r\n`);
  await waitFor(() => client.received().includes("\r\n\r\n"), "the handshake's answer");
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(client.received())?.[1]);
  client.socket.destroy();
  await client.closed;
  return status;
}

/**
 * Sends a request whose chunked body never ends (64 KiB a write, on and on) until the server answers
 * and ends the connection; resolves with the answer's head and how much body was sent.
 */
async function endlessBody(port: number, method: string, path: string): Promise<{ head: string; sent: number }> {
  const client = rawClient(port);
  client.socket.write(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
  const piece = Buffer.alloc(64 * 1024, 0x20);
  const frame = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")]);
  let sent = 0;
  // Writes while the socket takes them; the deadline is only for a server that never answers.
  const deadline = Date.now() + 90_000;
  while (!client.isClosed()) {
    if (Date.now() > deadline) throw new Error(`no end of the connection after ${sent} bytes of body`);
    if (client.socket.write(frame)) sent += piece.length;
    else await Promise.race([new Promise((resolve) => client.socket.once("drain", resolve)), client.closed]);
  }
  return { head: client.received().split("\r\n\r\n")[0]!, sent };
}

/** Sends only a request head declaring `length` bytes of body; resolves with the answer once the server ends the connection. */
async function declaredBody(port: number, method: string, path: string, length: number): Promise<string> {
  const client = rawClient(port);
  client.socket.write(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`);
  await waitFor(() => client.isClosed(), `the answer to ${method} ${path} and the connection's end`);
  return client.received();
}

describe("the provider port", () => {
  it("takes any Host and a handshake with no Origin; refuses a browser page's Origin unless allowed", async () => {
    const proxy = await proxyWith({ allowedProviderOrigins: ["https://console.example"] });
    // The provider names the container by the address that reaches it.
    expect(await handshake(proxy.port, { host: `container-7.internal:${proxy.port}` })).toBe(101);
    const second = await proxyWith();
    expect(await handshake(second.port, { origin: "http://evil.example" })).toBe(403);
    expect(await handshake(second.port, { host: "evil.example", origin: "http://evil.example" })).toBe(403);
    expect(await handshake(second.port, { origin: "https://console.example" })).toBe(403);
    // A loopback page (a local tool), and an allowed one, pass.
    expect(await handshake(second.port, { origin: "http://localhost:3000" })).toBe(101);
    expect(await handshake(proxy.port, { origin: "https://console.example" })).toBe(101);
  });

  it("reads no body of a plain request: the refusal ends the connection, however much is sent", async () => {
    const proxy = await proxyWith();
    const { head } = await endlessBody(proxy.port, "POST", "/requests");
    expect(head).toMatch(/^HTTP\/1\.1 426 /);
    expect(head.toLowerCase()).toContain("connection: close");
  });
});

describe("the program port", () => {
  const limit = 64 * 1024;
  it.each(["/mcp", "/command", "/vault/some-key"])("%s answers a body over its limit at once and ends the connection", async (path) => {
    const proxy = await proxyWith({ maxMessageBytes: limit });
    const method = path.startsWith("/vault") ? "PUT" : "POST";
    // A Content-Length over the limit: answered with none of the body sent.
    const answer = await declaredBody(proxy.programPort, method, path, 1024 * 1024 * 1024);
    expect(answer).toMatch(/^HTTP\/1\.1 (400|413) /);
    expect(answer.toLowerCase()).toContain("connection: close");
    expect(answer).toMatch(/larger than \d+ bytes/);
    // A chunked body that never ends: answered once it passes the limit, the connection ended.
    const { head, sent } = await endlessBody(proxy.programPort, method, path);
    expect(head).toMatch(/^HTTP\/1\.1 (400|413) /);
    expect(sent).toBeGreaterThan(limit - 64 * 1024);
  });
});
