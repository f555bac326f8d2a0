// The frames' own WebSocket message writer, checked against `ws`'s real parser on loopback in both
// directions: a client's messages must be masked (ws's server closes with 1002 on an unmasked one),
// a server's must not be (ws's client fails the connection on a masked one), every length encoding.
import type { Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { BinaryMessageWriter, FrameSocket } from "../src/index.js";
import { maskInPlace } from "../src/message-writer.js";

const servers: WebSocketServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    for (const client of server.clients) client.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A real ws pair on loopback, with the raw socket under each end. */
async function connected(): Promise<{ client: WebSocket; clientStream: Socket; server: WebSocket; serverStream: Socket }> {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  servers.push(wss);
  await new Promise((resolve) => wss.once("listening", resolve));
  const serverSide = new Promise<{ server: WebSocket; serverStream: Socket }>((resolve) => wss.once("connection", (server, request) => resolve({ server, serverStream: request.socket as Socket })));
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as { port: number }).port}/`);
  let clientStream!: Socket;
  client.once("upgrade", (response) => (clientStream = response.socket as Socket));
  await new Promise((resolve) => client.once("open", resolve));
  return { client, clientStream, ...(await serverSide) };
}

function bytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + seed) & 0xff;
  return out;
}

function collect(socket: WebSocket, count: number): Promise<Buffer[]> {
  const got: Buffer[] = [];
  return new Promise((resolve, reject) => {
    socket.on("message", (data: Buffer, isBinary) => {
      if (!isBinary) return reject(new Error("a text message arrived"));
      got.push(data);
      if (got.length === count) resolve(got);
    });
    socket.once("close", (code) => reject(new Error(`closed with ${code} after ${got.length} messages`)));
  });
}

// 0, the 7-bit limit and past it, the 16-bit limit and past it (the 64-bit length).
const LENGTHS = [0, 1, 125, 126, 127, 65535, 65536, 70_001, 1_048_579];

describe("maskInPlace", () => {
  it("gives byte i the key's byte i mod 4, at every alignment of the memory, start and length", () => {
    const key = new Uint8Array([0x9e, 0x37, 0x01, 0xf4]);
    for (let pad = 0; pad < 8; pad++) {
      const memory = new Uint8Array(pad + 300);
      const buffer = memory.subarray(pad);
      for (let start = 0; start < 9; start++) {
        for (const length of [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 255]) {
          const original = bytes(buffer.length, start + length);
          buffer.set(original);
          maskInPlace(buffer, start, length, key);
          const expected = original.map((byte, i) => (i >= start && i < start + length ? byte ^ key[(i - start) & 3]! : byte));
          expect(Buffer.compare(buffer, expected), `pad ${pad}, start ${start}, length ${length}`).toBe(0);
        }
      }
    }
  });
});

describe("BinaryMessageWriter", () => {
  it("writes client messages, masked, that ws's server reads back byte for byte at every length encoding", async () => {
    const { clientStream, server } = await connected();
    const writer = new BinaryMessageWriter(clientStream, true);
    const arriving = collect(server, LENGTHS.length + 1);
    for (const [n, length] of LENGTHS.entries()) writer.write([bytes(length, n)]);
    // Several parts make one message, masked across part boundaries.
    writer.write([bytes(9, 1), bytes(3, 2), new Uint8Array(0), bytes(200, 3)]);
    const got = await arriving;
    for (const [n, length] of LENGTHS.entries()) expect(Buffer.compare(got[n]!, Buffer.from(bytes(length, n)))).toBe(0);
    expect([...got[LENGTHS.length]!]).toEqual([...bytes(9, 1), ...bytes(3, 2), ...bytes(200, 3)]);
  });

  it("writes server messages, unmasked, that ws's client reads back byte for byte at every length encoding", async () => {
    const { client, serverStream } = await connected();
    const writer = new BinaryMessageWriter(serverStream, false);
    const arriving = collect(client, LENGTHS.length);
    for (const [n, length] of LENGTHS.entries()) writer.write([bytes(length, n)]);
    const got = await arriving;
    for (const [n, length] of LENGTHS.entries()) expect(Buffer.compare(got[n]!, Buffer.from(bytes(length, n)))).toBe(0);
  });

  it("masks each client message with a fresh key, and writes each message as one chunk", async () => {
    const chunks: Uint8Array[] = [];
    const writer = new BinaryMessageWriter({ write: (chunk) => (chunks.push(chunk), true) }, true);
    for (let i = 0; i < 3000; i++) writer.write([bytes(9, i), bytes(20, i)]);
    expect(chunks).toHaveLength(3000);
    const keys = chunks.map((chunk) => {
      expect(chunk[0]).toBe(0x82);
      expect(chunk[1]).toBe(0x80 | 29);
      return Buffer.from(chunk.subarray(2, 6)).toString("hex");
    });
    // 3000 keys span more than one draw of the random pool; random 32-bit keys repeat rarely.
    expect(new Set(keys).size).toBeGreaterThan(2990);
    const server = new BinaryMessageWriter({ write: (chunk) => (chunks.push(chunk), true) }, false);
    server.write([bytes(9, 0)]);
    expect([...chunks.at(-1)!]).toEqual([0x82, 9, ...bytes(9, 0)]);
  });
});

describe("FrameSocket with the upgrade's stream", () => {
  it("writes its frames itself on both sides, small and large, in order", async () => {
    const { client, clientStream, server, serverStream } = await connected();
    const sizes = [3, 200_000, 7, 70_000, 0, 1];
    // The server answers the client's channel (written by the server's writer, unmasked) ...
    const serverFrames = new FrameSocket(server as never, {
      role: "server",
      stream: serverStream,
      events: {
        scope: (scope) => scope.respond(new Uint8Array([0])),
        channel: (channel) => {
          for (const [n, size] of sizes.entries()) channel.respond(bytes(size, n));
          channel.finish();
        },
      },
    });
    // ... and the client answers the server's channel, every frame masked by the client's writer,
    // all in one turn on the same stream.
    const clientFrames = new FrameSocket(client as never, {
      role: "client",
      stream: clientStream,
      events: {
        channel: (channel) => {
          for (const [n, size] of sizes.entries()) channel.respond(bytes(size, n + 10));
          channel.finish();
        },
      },
    });
    expect(serverFrames.writesMessages).toBe(true);
    expect(clientFrames.writesMessages).toBe(true);
    const answer = (open: (handlers: { response(p: Uint8Array): void; finish(): void }) => void) =>
      new Promise<Uint8Array[]>((resolve) => {
        const got: Uint8Array[] = [];
        open({ response: (payload) => got.push(payload.slice()), finish: () => resolve(got) });
      });
    const begun = new Promise<void>((resolve) => clientFrames.mux.openScope(new Uint8Array([1]), { response: () => resolve(), finish: () => {} }));
    const toClient = answer((handlers) => clientFrames.mux.openChannel(1, new Uint8Array([5]), handlers));
    await begun;
    const toServer = answer((handlers) => serverFrames.mux.openChannel(1, new Uint8Array([6]), handlers));
    const [fromServer, fromClient] = await Promise.all([toClient, toServer]);
    expect(fromServer.map((p) => p.length)).toEqual(sizes);
    expect(fromClient.map((p) => p.length)).toEqual(sizes);
    for (const [n, size] of sizes.entries()) {
      expect(Buffer.compare(Buffer.from(fromServer[n]!), Buffer.from(bytes(size, n)))).toBe(0);
      expect(Buffer.compare(Buffer.from(fromClient[n]!), Buffer.from(bytes(size, n + 10)))).toBe(0);
    }
  });

  it("leaves sending to the WebSocket when no stream is given", async () => {
    const { client } = await connected();
    expect(new FrameSocket(client as never, { role: "client" }).writesMessages).toBe(false);
  });
});
