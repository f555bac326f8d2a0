// openSocket's writes, read by a real `ws` server on loopback: the small messages it frames itself
// (batched per turn) and the larger ones `ws` frames arrive whole, byte for byte, in the order sent,
// whatever their sizes at the frame-length boundaries; and a close sends what was sent before it.
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer, type WebSocket } from "ws";
import { defaultWebSocket, openSocket, type OpenSocket } from "../src/paths/index.js";

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A `ws` server that records every binary message of its first connection. */
async function recordingServer(): Promise<{ url: string; received: Buffer[]; connection: Promise<WebSocket> }> {
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const received: Buffer[] = [];
  const connection = new Promise<WebSocket>((resolve) =>
    server.once("connection", (socket) => {
      closers.push(() => socket.terminate());
      socket.on("message", (data: Buffer) => received.push(Buffer.from(data)));
      resolve(socket);
    }),
  );
  return { url: `ws://127.0.0.1:${(server.address() as { port: number }).port}`, received, connection };
}

/** A message of `length` bytes whose content says where it is in the sequence. */
function message(index: number, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (index * 31 + i * 7) & 0xff;
  return bytes;
}

async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("the condition was not met within 20 s");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe("openSocket's frames", () => {
  it("every size, small and large, arrives whole and in order, sent in one turn and across turns", async () => {
    const { url, received } = await recordingServer();
    const socket: OpenSocket = await openSocket(defaultWebSocket, url);
    closers.push(() => socket.terminate());
    // Around each frame-length boundary (125/126, 65535/65536) and the small-frame limit (4096), and
    // enough 30-byte messages to fill more than one batch of a turn.
    const sizes = [0, 1, 2, 3, 4, 5, 30, 124, 125, 126, 127, 1000, 4094, 4095, 4096, 4097, 65535, 65536, 70000, ...Array.from({ length: 5000 }, () => 30), 7, 200_000, 9];
    const sent = sizes.map((size, index) => message(index, size));
    for (const bytes of sent) socket.send(bytes);
    // And some in later turns, a few per turn.
    for (let turn = 0; turn < 20; turn++) {
      await new Promise((resolve) => setImmediate(resolve));
      for (let i = 0; i < 3; i++) {
        const bytes = message(sent.length, (turn * 37 + i * 1000) % 5000);
        sent.push(bytes);
        socket.send(bytes);
      }
    }
    await until(() => received.length >= sent.length);
    expect(received.length).toBe(sent.length);
    for (let i = 0; i < sent.length; i++) expect(Buffer.compare(received[i]!, Buffer.from(sent[i]!)), `message ${i} (${sent[i]!.length} bytes)`).toBe(0);
  });

  it("a close right after sending: the messages of the turn arrive before the Close", async () => {
    const { url, received, connection } = await recordingServer();
    const socket = await openSocket(defaultWebSocket, url);
    const server = await connection;
    const closed = new Promise<number>((resolve) => server.once("close", (code) => resolve(code)));
    const sent = Array.from({ length: 100 }, (_, index) => message(index, 30));
    for (const bytes of sent) socket.send(bytes);
    socket.close();
    expect(await closed).toBe(1005);
    expect(received.length).toBe(sent.length);
    const ending = await socket.ended;
    expect(ending.clean).toBe(true);
  });

  it("bufferedAmount counts what waits in the turn's batch", async () => {
    const { url, received } = await recordingServer();
    const socket = await openSocket(defaultWebSocket, url);
    closers.push(() => socket.terminate());
    expect(socket.bufferedAmount).toBe(0);
    socket.send(message(0, 30));
    socket.send(message(1, 30));
    // Two frames of 6 header bytes and 30 payload bytes, not yet written.
    expect(socket.bufferedAmount).toBeGreaterThanOrEqual(72);
    await until(() => received.length === 2);
    await until(() => socket.bufferedAmount === 0);
  });
});
