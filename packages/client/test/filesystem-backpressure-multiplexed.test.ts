// A reader slower than the wire on the multiplexed transport: a scope has no flow control of its own,
// so the read's stream holds up to READ_HIGH_WATER for its reader and then pauses reading the whole
// connection until the reader has taken most of it; a reader that takes nothing for `stallMs` while
// the connection waits on it gets `Stalled`, the read is stopped, and the connection serves on.
import { open, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { FilesystemError, openContainer, PIECE_SIZE, READ_HIGH_WATER } from "../src/index.js";

const MiB = 1024 * 1024;
const SIZE = 128 * MiB;
let root: string;
let proxy: RunningProxy;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The 8-byte marker written at each MiB of the sparse file: its own offset. */
const marker = (offset: number) => {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(BigInt(offset + 1));
  return bytes;
};

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "diverge-client-fs-mflow-"));
  // Sparse, with a marker at every MiB so order is checked without writing 128 MiB.
  const file = await open(join(root, "big.bin"), "w");
  await file.truncate(SIZE);
  for (let at = 0; at < SIZE; at += MiB) await file.write(marker(at), 0, 8, at);
  await file.close();
  await writeFile(join(root, "small.txt"), "still served");
});
// A proxy takes one multiplexed connection in its life: one proxy per test.
beforeEach(async () => {
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root, log: () => {} });
});
afterEach(async () => {
  await proxy?.close();
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Polls `condition` until it holds; the deadline is only a hang guard. */
async function until(condition: () => boolean, what: string, ms = 60_000): Promise<void> {
  for (const deadline = Date.now() + ms; !condition(); await sleep(20)) if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  for await (const part of stream as unknown as AsyncIterable<Uint8Array>) text += Buffer.from(part).toString();
  return text;
}

describe("a read whose reader lags (multiplexed transport)", () => {
  it("pauses the connection instead of holding the file, and delivers every byte in order", async () => {
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`);
    try {
      const reader = connection.read(["big.bin"]).getReader();
      let total = 0;
      let nextMarker = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        // Every marker in this piece sits at its offset, and the bytes between are zero.
        const piece = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
        for (let at = nextMarker; at < total + piece.length; at += MiB) {
          expect(piece.subarray(at - total, at - total + 8).equals(marker(at))).toBe(true);
          nextMarker = at + MiB;
        }
        total += piece.length;
        // Slower than the wire whatever the machine's load: after the first piece the reader waits
        // until the read has paused the connection (its condition, not a pace), then reads slowly.
        if (total === piece.length) await until(() => connection.readFlow.pausedConnection > 0, "the read to pause the connection");
        await sleep(20);
      }
      expect(total).toBe(SIZE);
      expect(nextMarker).toBe(SIZE);
      // What the provider held for the reader stayed within the budget and one piece, far below the file.
      expect(connection.readFlow.maxHeld).toBeGreaterThan(0);
      expect(connection.readFlow.maxHeld).toBeLessThanOrEqual(READ_HIGH_WATER + PIECE_SIZE);
      expect(connection.readFlow.pausedConnection).toBeGreaterThan(0);
      expect(connection.readFlow).toMatchObject({ heldNow: 0, holdingNow: 0, endedStalled: 0 });
    } finally {
      await connection.close();
    }
  });

  it("stops a read whose reader takes nothing for stallMs, and the connection serves on", async () => {
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`);
    try {
      const stallMs = 300;
      const reader = connection.read(["big.bin"], { stallMs }).getReader();
      const first = await reader.read();
      expect(first.value!.length).toBeGreaterThan(0);
      // The reader takes nothing more; the read pauses the connection, then is stopped.
      await until(() => connection.readFlow.endedStalled > 0, "the stalled read to be stopped");
      expect(connection.readFlow.endedStalled).toBe(1);
      const failure = await reader.read().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(FilesystemError);
      expect((failure as FilesystemError).detail).toEqual({ variant: "Stalled", what: "filesystem::read", stallMs });
      expect(connection.readFlow).toMatchObject({ heldNow: 0, holdingNow: 0 });
      // The connection reads on: another exchange is served.
      expect(await readAll(connection.read(["small.txt"]))).toBe("still served");
    } finally {
      await connection.close();
    }
  });

  it("a stream dropped unread does not freeze the connection", async () => {
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`);
    try {
      // Nobody ever reads this stream: it fills, pauses the connection, and the stall ends it.
      connection.read(["big.bin"], { stallMs: 300 });
      await until(() => connection.readFlow.endedStalled > 0, "the stalled read to be stopped");
      expect(connection.readFlow.endedStalled).toBe(1);
      expect(await readAll(connection.read(["small.txt"]))).toBe("still served");
    } finally {
      await connection.close();
    }
  });
});
