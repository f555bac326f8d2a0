// The lean opener (lean-open.ts): the upgrade handshake written on a plain socket, the connection then
// run by `ws`. Against a real `ws` server it must behave as `ws`'s own client does; against servers
// that answer wrongly (a refusal, a bad accept, an extension nobody asked for, a socket that ends
// mid-answer, an answer that never ends its head) it must fail the opening, typed, and never hang.
import { createHash } from "node:crypto";
import { createServer as createHttpServer } from "node:http";
import { createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { defaultWebSocket, openSocket, type OpenFailure } from "../src/paths/index.js";
import { LeanWebSocket, refusalOf } from "../src/paths/lean-open.js";

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

const acceptOf = (key: string) => createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");

async function listen(server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => (server.closeAllConnections?.(), server.close(resolve))));
  return (server.address() as { port: number }).port;
}

/** A raw server: reads the upgrade request and answers with `answer(key)`'s bytes. */
async function rawServer(answer: (key: string, socket: Socket) => void): Promise<number> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    let got = "";
    socket.on("data", (chunk) => {
      got += chunk.toString("latin1");
      if (!got.includes("\r\n\r\n")) return;
      socket.removeAllListeners("data");
      answer(/sec-websocket-key: (\S+)/i.exec(got)![1]!, socket);
    });
  });
  closers.push(async () => {
    for (const socket of sockets) socket.destroy();
  });
  return listen(server);
}

const failureOf = (url: string) => openSocket(defaultWebSocket, url).then(
  () => expect.fail("opened"),
  (failure: OpenFailure) => failure,
);

describe("the lean opener", () => {
  it("is the default for ws: URLs, and talks to a real ws server both ways: the request's path and query, binary messages, a ping answered, a clean close", async () => {
    const server = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false });
    closers.push(() => new Promise((resolve) => (server.clients.forEach((c) => c.terminate()), server.close(resolve))));
    await new Promise((resolve) => server.once("listening", resolve));
    let requested = "";
    let authorization: string | undefined;
    const ponged = new Promise<string>((resolve) =>
      server.on("connection", (peer, request) => {
        requested = request.url ?? "";
        authorization = request.headers.authorization;
        peer.on("message", (data) => peer.send(Buffer.concat([Buffer.from("echo:"), data as Buffer])));
        peer.on("pong", (data) => resolve(String(data)));
        peer.ping("are you there");
      }),
    );
    const port = (server.address() as { port: number }).port;
    expect(new defaultWebSocket(`ws://127.0.0.1:${port}/x`)).toBeInstanceOf(LeanWebSocket);
    const socket = await openSocket(defaultWebSocket, `ws://127.0.0.1:${port}/some/path?q=1`);
    expect(requested).toBe("/some/path?q=1");
    expect(authorization).toBeUndefined();
    // Credentials in the URL: Basic authorization, as ws's own client sends them.
    const withCredentials = await openSocket(defaultWebSocket, `ws://user:p%40ss@127.0.0.1:${port}/x`);
    expect(authorization).toBe(`Basic ${Buffer.from("user:p@ss").toString("base64")}`);
    withCredentials.close();
    const echoed = new Promise<string>((resolve) => socket.onMessage((bytes) => resolve(Buffer.from(bytes).toString())));
    socket.send(new Uint8Array(Buffer.from("hello")));
    expect(await echoed).toBe("echo:hello");
    expect(await ponged).toBe("are you there");
    socket.close();
    expect(await socket.ended).toEqual({ clean: true, code: 1005 });
  });

  it("hands over frames that arrive in the same packet as the 101", async () => {
    const port = await rawServer((key, socket) => {
      // The 101, a binary message [7, 8, 9] and a Close (1000), in one write.
      socket.write(Buffer.concat([Buffer.from(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(key)}\r\n\r\n`, "latin1"), Buffer.from([0x82, 3, 7, 8, 9, 0x88, 2, 0x03, 0xe8])]));
    });
    const socket = await openSocket(defaultWebSocket, `ws://127.0.0.1:${port}/`);
    const got = await new Promise<number[]>((resolve) => socket.onMessage((bytes) => resolve([...bytes])));
    expect(got).toEqual([7, 8, 9]);
    expect((await socket.ended).code).toBe(1000);
  });

  it("reports a refusal's status, as ws's own client does", async () => {
    const server = createHttpServer();
    server.on("upgrade", (_request, socket) => socket.end("HTTP/1.1 409 Conflict\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy\n"));
    const port = await listen(server);
    expect(await failureOf(`ws://127.0.0.1:${port}/requests`)).toEqual({ status: 409, message: "Unexpected server response: 409" });
  });

  it.each([
    ["a wrong Sec-WebSocket-Accept", () => "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: bm90IHRoZSBhbnN3ZXI=\r\n\r\n", "Invalid Sec-WebSocket-Accept header"],
    ["no Upgrade header", (key: string) => `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(key)}\r\n\r\n`, "Invalid Upgrade header"],
    ["an extension nobody asked for", (key: string) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(key)}\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n`, "Server sent a Sec-WebSocket-Extensions header but no extension was requested"],
    ["a subprotocol nobody asked for", (key: string) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(key)}\r\nSec-WebSocket-Protocol: chat\r\n\r\n`, "Server sent a subprotocol but none was requested"],
    ["a status line that is not HTTP", () => "SSH-2.0-OpenSSH_9.2\r\n\r\n", "Invalid HTTP response to the upgrade request"],
  ])("fails the opening on %s", async (_what, answer, message) => {
    const port = await rawServer((key, socket) => socket.write(answer(key)));
    expect(await failureOf(`ws://127.0.0.1:${port}/`)).toEqual({ status: undefined, message });
  });

  it("fails, not hangs, when the server ends mid-answer or never ends the answer's head", async () => {
    const cut = await rawServer((_key, socket) => socket.end("HTTP/1.1 101 Switching Protocols\r\nUpgrade: webs"));
    expect((await failureOf(`ws://127.0.0.1:${cut}/`)).message).toBe("Socket closed before the upgrade was answered");
    const endless = await rawServer((_key, socket) => {
      socket.write("HTTP/1.1 101 Switching Protocols\r\n");
      socket.write(`X-Filler: ${"a".repeat(20_000)}`);
    });
    expect((await failureOf(`ws://127.0.0.1:${endless}/`)).message).toBe("The upgrade answer's head is too large");
  });

  it("leaves wss: URLs to ws's own client (TLS), still a ws WebSocket", async () => {
    const server = createServer();
    const port = await listen(server);
    const socket = new defaultWebSocket(`wss://127.0.0.1:${port}/`) as unknown as WebSocket;
    expect(socket).toBeInstanceOf(WebSocket);
    expect(socket).not.toBeInstanceOf(LeanWebSocket);
    socket.on("error", () => {});
    const closed = new Promise((resolve) => socket.on("close", resolve));
    socket.terminate();
    await closed;
  });

  it("a refused connection fails with the system's reason", async () => {
    const server = createServer();
    const port = await listen(server);
    await new Promise((resolve) => server.close(resolve));
    expect((await failureOf(`ws://127.0.0.1:${port}/`)).message).toMatch(/ECONNREFUSED/);
  });

  it("close() and terminate() while opening end it with an error and a 1006 close, and nothing throws", async () => {
    const port = await rawServer(() => {}); // never answers
    for (const end of ["close", "terminate"] as const) {
      const socket = new LeanWebSocket(`ws://127.0.0.1:${port}/`);
      const events: string[] = [];
      socket.on("error", (error) => events.push(`error: ${error.message}`));
      const closed = new Promise<number>((resolve) => socket.on("close", resolve));
      socket[end]();
      expect(await closed).toBe(1006);
      expect(events).toEqual(["error: WebSocket was closed before the connection was established"]);
      expect(socket.readyState).toBe(socket.CLOSED);
    }
  });

  it("reads an answer's head as RFC 6455 §4.1 asks", () => {
    const key = "dGhlIHNhbXBsZSBub25jZQ==";
    // The RFC's own example key and accept.
    expect(acceptOf(key)).toBe("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    const ok = "HTTP/1.1 101 Switching Protocols\r\nUPGRADE: WebSocket\r\nconnection: upgrade\r\nsec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
    expect(refusalOf(ok, key)).toBeUndefined();
    expect(refusalOf("HTTP/1.0 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", key)).toBeUndefined();
    expect(refusalOf(`${ok}\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=`, key)).toBe("Duplicate sec-websocket-accept header");
    expect(refusalOf(`${ok}\r\nno colon here`, key)).toBe("Invalid header in the upgrade answer");
    expect(refusalOf("HTTP/1.1 1010 Nope", key)).toBe("Invalid HTTP response to the upgrade request");
    expect(refusalOf("HTTP/1.1 503", key)).toBe("Unexpected server response: 503");
  });
});
