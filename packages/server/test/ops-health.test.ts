// The `--health` server (serveOps) over real sockets: a Host or Origin that is neither loopback nor
// the bound host is refused (DNS rebinding would bring a web page here), only GET and HEAD are
// served, and a request carrying a body is refused without its body being read.
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { serveOps, type OpsServer } from "@diverge/multiplexer/ops";

let server: OpsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const start = (host = "127.0.0.1", allowedHosts?: string[]) =>
  serveOps({ host, port: 0, health: () => ({ ready: true }), metrics: [{ name: "test_up", help: "1", type: "gauge", read: () => 1 }], allowedHosts });

/** Sends `head` (each asks `connection: close`) and `body`, when given, in chunks while the socket takes them; reads the answer until the server closes. */
function exchange(port: number, head: string, body?: { total: number }): Promise<{ status: number; text: string; closed: boolean; sent: number }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    let sent = 0;
    let closed = false;
    socket.on("error", (error: NodeJS.ErrnoException) => {
      // The server closing while a body is still being sent: EPIPE / ECONNRESET on our side.
      if (error.code === "EPIPE" || error.code === "ECONNRESET") closed = true;
      else reject(error);
    });
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
    });
    socket.on("close", () => {
      closed = true;
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text, closed, sent });
    });
    socket.write(head.replace(/\r\n\r\n$/, "\r\nconnection: close\r\n\r\n"));
    if (body) {
      const chunk = Buffer.alloc(64 * 1024, "x");
      const pump = () => {
        while (!closed && !socket.destroyed && sent < body.total) {
          sent += chunk.length;
          if (!socket.write(chunk)) return void socket.once("drain", pump);
        }
      };
      pump();
    }
  });
}

const get = (path: string, headers: Record<string, string>) =>
  `GET ${path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("")}\r\n`;

describe("--health: Host and Origin", () => {
  it("answers loopback names, and refuses any other Host with 403", async () => {
    server = await start();
    for (const host of [`127.0.0.1:${server.port}`, `localhost:${server.port}`, "localhost", `[::1]:${server.port}`]) {
      expect((await exchange(server.port, get("/healthz", { host }))).status, host).toBe(200);
    }
    for (const host of ["attacker.example", `attacker.example:${server.port}`, "127.0.0.1.attacker.example", "localhost@attacker.example"]) {
      const answer = await exchange(server.port, get("/healthz", { host }));
      expect(answer.status, host).toBe(403);
      expect(answer.text).not.toContain('"ready"');
    }
    // No Host at all (HTTP/1.0 style): refused too.
    expect((await exchange(server.port, "GET /metrics HTTP/1.0\r\n\r\n")).status).toBe(403);
  });

  it("refuses a foreign Origin (a web page's fetch) and answers a loopback one", async () => {
    server = await start();
    const host = `127.0.0.1:${server.port}`;
    expect((await exchange(server.port, get("/metrics", { host, origin: "http://attacker.example" }))).status).toBe(403);
    expect((await exchange(server.port, get("/metrics", { host, origin: "null" }))).status).toBe(403);
    expect((await exchange(server.port, get("/metrics", { host, origin: `http://localhost:${server.port}` }))).status).toBe(200);
  });

  it("answers the host it is bound to: every local address when bound to all, and a name it is told", async () => {
    server = await start("0.0.0.0", ["metrics.internal"]);
    const addresses = Object.values(networkInterfaces())
      .flatMap((entries) => entries ?? [])
      .filter((entry) => entry.family === "IPv4")
      .map((entry) => entry.address);
    for (const address of addresses) expect((await exchange(server.port, get("/healthz", { host: `${address}:${server.port}` }))).status, address).toBe(200);
    expect((await exchange(server.port, get("/healthz", { host: `metrics.internal:${server.port}` }))).status).toBe(200);
    expect((await exchange(server.port, get("/healthz", { host: "attacker.example" }))).status).toBe(403);
  });
});

describe("--health: methods and bodies", () => {
  it("serves GET and HEAD only: any other method is 405 with Allow", async () => {
    server = await start();
    const host = `127.0.0.1:${server.port}`;
    expect((await exchange(server.port, `HEAD /healthz HTTP/1.1\r\nhost: ${host}\r\n\r\n`)).status).toBe(200);
    for (const method of ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"]) {
      const answer = await exchange(server.port, `${method} /healthz HTTP/1.1\r\nhost: ${host}\r\ncontent-length: 0\r\n\r\n`);
      expect(answer.status, method).toBe(405);
      expect(answer.text).toMatch(/allow: GET, HEAD/i);
    }
  });

  it("refuses a request that carries a body with 413 and closes, without reading it", async () => {
    server = await start();
    const host = `127.0.0.1:${server.port}`;
    const total = 256 * 1024 * 1024;
    const declared = await exchange(server.port, `GET /healthz HTTP/1.1\r\nhost: ${host}\r\ncontent-length: ${total}\r\n\r\n`, { total });
    expect(declared.status).toBe(413);
    expect(declared.closed).toBe(true);
    // The connection was closed long before the 256 MiB were sent: the body was not read.
    expect(declared.sent).toBeLessThan(total);
    const chunked = await exchange(server.port, `GET /metrics HTTP/1.1\r\nhost: ${host}\r\ntransfer-encoding: chunked\r\n\r\n`);
    expect(chunked.status).toBe(413);
    expect(chunked.closed).toBe(true);
  });
});
