// A proxy stopped mid-write (SIGTERM to the real `diverge-proxy` process) removes the temporaries of
// the writes it still has in flight before exiting: nothing `.diverge-write-` is left under the
// root, and the destination keeps its old content.
import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeFilesystemPathsRequest } from "@diverge/codec";
import { WebSocket } from "ws";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
let base: string;
beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "diverge-fs-shutdown-"));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

const temporaries = async (root: string) => (await readdir(root)).filter((name) => name.includes(".diverge-write-"));

describe("a proxy stopped with SIGTERM mid-write", () => {
  it("removes the temporary of the write in flight; the destination keeps its old content", { timeout: 120_000 }, async () => {
    const root = await mkdtemp(join(base, "root-"));
    await writeFile(join(root, "f.bin"), "old");
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate", "--quiet", "--root", root], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const port = await new Promise<number>((resolve, reject) => {
      let out = "";
      child.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const found = /ws:\/\/127\.0\.0\.1:(\d+)/.exec(out);
        if (found) resolve(Number(found[1]));
      });
      child.once("exit", (code) => reject(new Error(`the proxy exited with ${code}`)));
    });
    try {
      const socket = new WebSocket(`ws://127.0.0.1:${port}/filesystem/write`);
      socket.on("error", () => undefined);
      await new Promise<void>((resolve, reject) => {
        socket.once("open", resolve);
        socket.once("error", reject);
      });
      socket.send(encodeFilesystemPathsRequest({ request: { path: ["f.bin"] } }));
      // Content sent, never ended (no empty message): the write is held open mid-way.
      socket.send(new Uint8Array(64 * 1024).fill(7));
      // Until the temporary exists and holds the piece (a condition, not a time).
      for (;;) {
        const names = await temporaries(root);
        if (names.length === 1 && (await readFile(join(root, names[0]!))).length === 64 * 1024) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      socket.terminate();
      expect(await temporaries(root)).toEqual([]);
      expect(await readdir(root)).toEqual(["f.bin"]);
      expect(await readFile(join(root, "f.bin"), "utf8")).toBe("old");
    } finally {
      child.kill("SIGKILL");
    }
  });
});
