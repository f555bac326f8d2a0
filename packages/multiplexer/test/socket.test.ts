// FrameSocket over a real WebSocket on loopback: both roles, text ignored, the close ending streams.
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { toHex } from "@diverge/codec";
import { FrameSocket, binaryOf, type Responder } from "../src/index.js";

const servers: WebSocketServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    for (const client of server.clients) client.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function pair(onServer: (frames: FrameSocket) => void): Promise<{ client: FrameSocket; clientSocket: WebSocket }> {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  servers.push(server);
  await new Promise((resolve) => server.once("listening", resolve));
  server.on("connection", (socket) => onServer(new FrameSocket(socket as never, { role: "server", events: serverEvents })));
  const port = (server.address() as { port: number }).port;
  const clientSocket = new WebSocket(`ws://127.0.0.1:${port}/`);
  await new Promise((resolve) => clientSocket.once("open", resolve));
  return { client: new FrameSocket(clientSocket as never, { role: "client" }), clientSocket };
}

let serverEvents: ConstructorParameters<typeof FrameSocket>[1]["events"] = {};

describe("FrameSocket", () => {
  it("carries a scope and a channel between two real sockets and ignores text messages", async () => {
    const scopes: Responder[] = [];
    serverEvents = {
      scope: (responder, payload) => {
        scopes.push(responder);
        responder.respond(payload);
      },
      channel: (responder, payload) => {
        responder.respond(new Uint8Array([...payload, 0xff]));
        responder.finish();
      },
    };
    let serverSide!: FrameSocket;
    const { client, clientSocket } = await pair((frames) => (serverSide = frames));
    clientSocket.send("not a frame");
    const answers: string[] = [];
    const begun = new Promise<void>((resolve) => {
      client.mux.openScope(new Uint8Array([1]), { response: (p) => (answers.push(`scope ${toHex(p)}`), resolve()), finish: () => answers.push("scope finish") });
    });
    await begun;
    const finished = new Promise<void>((resolve) => {
      client.mux.openChannel(1, new Uint8Array([7]), { response: (p) => answers.push(`channel ${toHex(p)}`), finish: (served) => (answers.push(`finish ${served}`), resolve()) });
    });
    await finished;
    expect(answers).toEqual(["scope 01", "channel 07ff", "finish true"]);
    expect(serverSide.mux.openScopes()).toEqual([1]);
    await client.drained(0);
  });

  it("ends every stream when the socket closes, and reports the close", async () => {
    serverEvents = {};
    const lost: string[] = [];
    const { client, clientSocket } = await pair((frames) => frames.close(4001));
    const closed = new Promise<void>((resolve) => clientSocket.on("close", () => setImmediate(resolve)));
    client.mux.openScope(new Uint8Array([1]), { response: () => {}, finish: () => {}, lost: () => lost.push("scope") });
    await closed;
    expect(lost).toEqual(["scope"]);
    expect(client.closed).toBe(true);
    expect(client.mux.ended).toBe(true);
  });

  it("pauses and resumes reading, counting nested pauses", async () => {
    serverEvents = {};
    const { client, clientSocket } = await pair(() => {});
    const resumeA = client.pauseIncoming();
    const resumeB = client.pauseIncoming();
    expect(clientSocket.isPaused).toBe(true);
    resumeA();
    resumeA();
    expect(clientSocket.isPaused).toBe(true);
    resumeB();
    expect(clientSocket.isPaused).toBe(false);
  });

  it("drained(): waiters share one poll, are released once the buffer drains, and all at once when the socket closes", async () => {
    serverEvents = {};
    let serverSide!: FrameSocket;
    const { client, clientSocket } = await pair((frames) => (serverSide = frames));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // The client stops reading; the server sends until its buffer is well over a megabyte.
    clientSocket.pause();
    const big = new Uint8Array(256 * 1024);
    while (serverSide.bufferedAmount < 4 * 1024 * 1024) serverSide.socket.send(big);
    const released: number[] = [];
    const waits = Array.from({ length: 50 }, (_, i) => serverSide.drained(1024 * 1024).then(() => released.push(i)));
    expect(serverSide.drainWaiting).toBe(50);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(released).toEqual([]);
    clientSocket.resume();
    await Promise.all(waits);
    expect(released).toHaveLength(50);
    expect(serverSide.drainWaiting).toBe(0);
    // Waiting again, then the socket closes: every waiter is released with it.
    clientSocket.pause();
    while (serverSide.bufferedAmount < 4 * 1024 * 1024) serverSide.socket.send(big);
    const stuck = Array.from({ length: 10 }, () => serverSide.drained(0));
    expect(serverSide.drainWaiting).toBe(10);
    clientSocket.terminate();
    await Promise.all(stuck);
    expect(serverSide.drainWaiting).toBe(0);
  });

  it("reads every binary shape a WebSocket delivers, and none for text", () => {
    expect(binaryOf("text")).toBeUndefined();
    expect(toHex(binaryOf(new Uint8Array([1, 2]))!)).toBe("0102");
    expect(toHex(binaryOf(new Uint8Array([1, 2, 3]).buffer)!)).toBe("010203");
    expect(toHex(binaryOf(new DataView(new Uint8Array([9, 8, 7]).buffer, 1))!)).toBe("0807");
    expect(toHex(binaryOf([Buffer.from([1]), Buffer.from([2, 3])])!)).toBe("010203");
  });
});
