// A reader slower than the wire: on the paths transport the read's stream stops reading its socket
// once it holds READ_HIGH_WATER bytes the reader has not taken, so the proxy waits instead of the
// provider holding the whole file; the reader still gets every byte once it reads on.
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startProxy, type RunningProxy } from "@diverge/server";
import { filesystemPaths, type PathsWebSocketConstructor } from "../src/index.js";

const MiB = 1024 * 1024;
const SIZE = 64 * MiB;
let root: string;
let proxy: RunningProxy;
const content = Buffer.alloc(SIZE, 0).map((_, i) => (i * 13 + (i >> 16)) & 0xff);

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "diverge-client-fs-flow-"));
  await writeFile(join(root, "big.bin"), content);
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root, log: () => {} });
});
afterAll(async () => {
  await proxy?.close();
  await rm(root, { recursive: true, force: true });
});

describe("a read whose reader lags (paths transport)", () => {
  it("pauses its socket instead of holding the file, and delivers every byte when read on", async () => {
    let received = 0;
    // The `ws` WebSocket, counting the bytes that reach this process.
    class Counting extends WebSocket {
      constructor(url: string) {
        super(url);
        this.on("message", (data: Buffer | ArrayBuffer) => (received += data.byteLength));
      }
    }
    const paths = filesystemPaths(`ws://127.0.0.1:${proxy.port}`, { WebSocket: Counting as unknown as PathsWebSocketConstructor });
    const reader = paths.read(["big.bin"]).getReader();
    const hash = createHash("sha256");
    let total = 0;
    const first = await reader.read();
    total += first.value!.length;
    hash.update(first.value!);
    // The reader stops taking pieces: wait until nothing more arrives (or everything has).
    let last = -1;
    for (let i = 0; i < 200 && received < SIZE + 64; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      if (received === last && i >= 5) break;
      last = received;
    }
    // Bounded by the stream's 8 MiB, a piece, and what the sockets and the kernel hold: far below the file.
    expect(received).toBeLessThan(SIZE / 2);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
      hash.update(value);
    }
    expect(total).toBe(SIZE);
    expect(hash.digest("hex")).toBe(createHash("sha256").update(content).digest("hex"));
  });
});
