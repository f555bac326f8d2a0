// SpillStream over a real TCP socket whose reader stops: what the socket cannot take within the
// budget goes to temporary files and back, in order, byte for byte, messages larger than one read
// back included; the caps end the stream and give every byte back to the pool.
import { randomBytes, createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SpillPool, SpillStream } from "../src/index.js";

const MiB = 1024 * 1024;
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function socketPair(): Promise<{ writer: Socket; reader: Socket }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
  const writer = connect((server.address() as { port: number }).port, "127.0.0.1");
  await new Promise((resolve) => writer.once("connect", resolve));
  const reader = await accepted;
  cleanups.push(() => {
    writer.destroy();
    reader.destroy();
    server.close();
  });
  return { writer, reader };
}

function sinkOf(socket: Socket) {
  return {
    get buffered() {
      return socket.writableLength;
    },
    write: (message: Uint8Array, flushed: () => void) => void socket.write(message, () => flushed()),
  };
}

describe("SpillStream", () => {
  it("a reader that stops: 48 MiB of messages from 1 B to 1 MiB arrive whole and in order once it reads, the memory at the budget, the files gone", { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "spill-test-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const { writer, reader } = await socketPair();
    reader.pause();
    const pool = new SpillPool(1024 * MiB, dir);
    let over = "";
    const stream = new SpillStream(sinkOf(writer), { budgetBytes: MiB, maxBytes: 512 * MiB, pool, over: (which) => (over = which) });
    const sent = createHash("sha256");
    let total = 0;
    let maxBuffered = 0;
    const sizes = [1, 100, 64 * 1024, 300 * 1024, MiB, 5000];
    for (let i = 0; total < 48 * MiB; i++) {
      const message = randomBytes(sizes[i % sizes.length]!);
      sent.update(message);
      total += message.length;
      stream.push(message);
      maxBuffered = Math.max(maxBuffered, writer.writableLength);
      if (i % 64 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(stream.spilling).toBe(true);
    expect(pool.used).toBeGreaterThan(24 * MiB);
    const received = createHash("sha256");
    let got = 0;
    const done = new Promise<void>((resolve) =>
      reader.on("data", (chunk: Buffer) => {
        received.update(chunk);
        got += chunk.length;
        maxBuffered = Math.max(maxBuffered, writer.writableLength);
        if (got === total) resolve();
      }),
    );
    reader.resume();
    await done;
    expect(received.digest("hex")).toBe(sent.digest("hex"));
    expect(over).toBe("");
    expect(stream.spilling).toBe(false);
    expect(pool.used).toBe(0);
    // The files were unlinked as soon as they were opened: nothing is left in the directory.
    expect(readdirSync(dir)).toEqual([]);
    // The budget, one message written straight, one read back from disk (a message larger than a read is read whole).
    expect(maxBuffered).toBeLessThanOrEqual(MiB + MiB + MiB + 4);
    stream.dispose();
  });

  it("past its own cap the stream is over and gives its disk back; past the pool's cap the next stream is", async () => {
    const { writer, reader } = await socketPair();
    reader.pause();
    const pool = new SpillPool(6 * MiB);
    const overs: string[] = [];
    const first = new SpillStream(sinkOf(writer), { budgetBytes: MiB, maxBytes: 4 * MiB, pool, over: (which) => overs.push(`first ${which}`) });
    // (The kernel's socket buffers take some megabytes first.)
    for (let i = 0; i < 400 && overs.length === 0; i++) {
      first.push(new Uint8Array(512 * 1024));
      if (i % 8 === 7) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(overs).toEqual(["first stream"]);
    expect(pool.used).toBe(0);
    const second = await socketPair();
    second.reader.pause();
    const a = new SpillStream(sinkOf(second.writer), { budgetBytes: MiB, maxBytes: 100 * MiB, pool, over: (which) => overs.push(`a ${which}`) });
    for (let i = 0; i < 400 && overs.length === 1; i++) {
      a.push(new Uint8Array(512 * 1024));
      if (i % 8 === 7) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(overs).toEqual(["first stream", "a total"]);
    expect(pool.used).toBe(0);
  });

  it("messages arriving one per turn go to disk in few large writes, and come back in order", { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "spill-test-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const { writer, reader } = await socketPair();
    reader.pause();
    const pool = new SpillPool(1024 * MiB, dir);
    const stream = new SpillStream(sinkOf(writer), { budgetBytes: 64 * 1024, maxBytes: 512 * MiB, pool, over: () => {} });
    const sent = createHash("sha256");
    let total = 0;
    // 6,000 messages of 8 KiB (a database's rows), each in a turn of its own, as a socket delivers them.
    // The kernel's socket buffers take the first several megabytes (how many is the kernel's choice:
    // 4 MiB in one run, 12 in another), so enough are sent that well over 1,500 spill whatever it takes.
    for (let i = 0; i < 6000; i++) {
      const message = randomBytes(8 * 1024);
      sent.update(message);
      total += message.length;
      stream.push(message);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(stream.spilledMessages).toBeGreaterThan(1500);
    // One write per message before; now a write waits for 256 KiB or a short delay, so tens of MiB are a few hundred writes at most.
    expect(stream.diskWrites).toBeLessThan(stream.spilledMessages / 10);
    const received = createHash("sha256");
    let got = 0;
    const done = new Promise<void>((resolve) =>
      reader.on("data", (chunk: Buffer) => {
        received.update(chunk);
        got += chunk.length;
        if (got === total) resolve();
      }),
    );
    reader.resume();
    await done;
    expect(received.digest("hex")).toBe(sent.digest("hex"));
    expect(pool.used).toBe(0);
  });
});
