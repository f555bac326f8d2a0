// The paths transport's provider-side socket over a real `ws` server on loopback: with `ws`, each
// binary message is handed over as the Buffer `ws` made for it (asking for "arraybuffer" copied every
// message into a new ArrayBuffer), text messages are ignored, and the bytes are the ones sent.
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";
import { defaultWebSocket, openSocket } from "../src/paths/index.js";

const servers: WebSocketServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    for (const client of server.clients) client.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe("openSocket with ws", () => {
  it("hands each binary message over as ws's own Buffer, in order, and ignores text", async () => {
    const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    servers.push(server);
    await new Promise((resolve) => server.once("listening", resolve));
    server.on("connection", (peer) => {
      peer.send(Buffer.from([1, 2, 3]));
      peer.send("text means nothing here");
      peer.send(Buffer.alloc(70_000, 7));
      peer.send(Buffer.from([9]));
    });
    const socket = await openSocket(defaultWebSocket, `ws://127.0.0.1:${(server.address() as { port: number }).port}/`);
    const got = await new Promise<Uint8Array[]>((resolve) => {
      const messages: Uint8Array[] = [];
      socket.onMessage((bytes) => {
        messages.push(bytes);
        if (messages.length === 3) resolve(messages);
      });
    });
    expect(got.map((bytes) => Buffer.isBuffer(bytes))).toEqual([true, true, true]);
    expect([...got[0]!]).toEqual([1, 2, 3]);
    expect(got[1]!.length).toBe(70_000);
    expect(got[1]!.every((byte) => byte === 7)).toBe(true);
    expect([...got[2]!]).toEqual([9]);
    socket.close();
  });
});
