// The provider's filesystem API (tree, read, write) against a real proxy over real sockets, on the
// multiplexed connection and on the paths transport, and `diverge fs` over paths.
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { FilesystemError, LiveTree, filesystemPaths, foldTree, openContainer, type FilesystemPaths, type MultiplexedConnection, type TreeStream } from "../src/index.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const run = promisify(execFile);

let base: string;
let root: string;
let proxy: RunningProxy;
let n = 0;
beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "diverge-client-fs-"));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});
async function fresh(): Promise<string> {
  root = join(base, `root-${++n}`);
  await mkdir(root);
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root, log: () => {} });
  return `ws://127.0.0.1:${proxy.port}`;
}
afterEach(async () => {
  await proxy?.close();
});

async function bytesOf(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of stream as unknown as AsyncIterable<Uint8Array>) parts.push(part);
  return Buffer.concat(parts);
}

/** How many descriptors of this process (the proxy runs here) are open on `path`. */
async function holding(path: string): Promise<number> {
  const fds = await readdir("/proc/self/fd");
  const targets = await Promise.all(fds.map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => "")));
  return targets.filter((t) => t === path).length;
}

/** Bytes this process has read through read(2) and friends so far: the proxy's file reads and the provider's socket reads. */
async function bytesReadHere(): Promise<number> {
  return Number(/^rchar: (\d+)$/m.exec(await readFile("/proc/self/io", "utf8"))![1]);
}

async function failure(promise: Promise<unknown>): Promise<FilesystemError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(FilesystemError);
    return error as FilesystemError;
  }
  throw new Error("it did not fail");
}

/** Folds frames (one iterator: leaving a `for await` would stop the tree) until `until(tree)` holds. */
async function waitFor(frames: AsyncIterator<LiveTree>, tree: LiveTree, until: (tree: LiveTree) => boolean): Promise<void> {
  while (!until(tree)) if ((await frames.next()).done) throw new Error("the tree ended first");
}

type Api = Pick<FilesystemPaths, "tree" | "read" | "write">;
const transports: [string, (url: string) => Promise<{ api: Api; close(): Promise<void> }>][] = [
  [
    "multiplexed",
    async (url) => {
      const connection: MultiplexedConnection = await openContainer(url);
      return { api: connection, close: () => connection.close() };
    },
  ],
  ["paths", async (url) => ({ api: filesystemPaths(url), close: async () => {} })],
];

describe.each(transports)("filesystem over %s", (_name, connect) => {
  it("tree: a live tree from the Snapshot and the deltas; stop() ends it", async () => {
    const url = await fresh();
    await mkdir(join(root, "src"));
    await writeFile(join(root, "src", "a.ts"), "a");
    await mkdir(join(root, "node_modules"));
    const { api, close } = await connect(url);
    const stream: TreeStream = api.tree({ ignore: [["node_modules"]] });
    const tree = new LiveTree();
    const frames = foldTree(stream, tree);
    await waitFor(frames, tree, (t) => t.paths().length > 0);
    expect(tree.paths()).toEqual(["src", "src/a.ts"]);
    await writeFile(join(root, "src", "b.ts"), "bb");
    await waitFor(frames, tree, (t) => t.get(["src", "b.ts"]) !== undefined);
    expect(tree.get(["src", "b.ts"])).toMatchObject({ variant: "File", size: 2n });
    // One path type: each path paths() gives is one get() takes as it is (issue 26 §3).
    for (const path of tree.paths()) expect(tree.get(path), path).toEqual(tree.get(path.split("/")));
    expect(tree.get("src/b.ts")).toMatchObject({ variant: "File", size: 2n });
    await rm(join(root, "src", "a.ts"));
    await waitFor(frames, tree, (t) => t.get(["src", "a.ts"]) === undefined);
    stream.stop();
    // The iteration ends once the proxy has stopped.
    while (!(await frames.next()).done);
    await close();
  });

  it("a reader that gives up (cancel, or its signal) stops the proxy reading: the file closed far before its end", { timeout: 120_000 }, async () => {
    const url = await fresh();
    const big = join(root, "sparse");
    // 1 GiB, sparse: 512 pieces of 2 MiB if nothing stops the read.
    await writeFile(big, "");
    await truncate(big, 1024 * 1024 * 1024);
    const { api, close } = await connect(url);
    for (const how of ["cancel", "abort"] as const) {
      const readBefore = await bytesReadHere();
      const aborter = new AbortController();
      const reader = api.read(["sparse"], { signal: aborter.signal }).getReader();
      const first = await reader.read();
      expect(first.value!.length).toBeGreaterThan(0);
      expect(await holding(big)).toBe(1);
      if (how === "cancel") await reader.cancel();
      else {
        aborter.abort();
        await expect(reader.read()).rejects.toThrow();
      }
      for (const deadline = Date.now() + 60_000; (await holding(big)) > 0 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await holding(big), how).toBe(0);
      // The proxy read (and this process received) a small part of the file, not all of it.
      expect(await bytesReadHere() - readBefore, how).toBeLessThan(256 * 1024 * 1024);
    }
    // The connection still serves.
    await writeFile(join(root, "small"), "box");
    expect((await bytesOf(api.read(["small"]))).toString()).toBe("box");
    await close();
  });

  it("read and write: a file over the message limit both ways, a failed content leaves the old file", async () => {
    const url = await fresh();
    const { api, close } = await connect(url);
    const big = randomBytes(18 * 1024 * 1024 + 3);
    // Written from an async iterable of uneven chunks.
    async function* chunks() {
      for (let at = 0; at < big.length; at += 5_000_000) yield big.subarray(at, at + 5_000_000);
    }
    await api.write(["big.bin"], chunks());
    expect((await readFile(join(root, "big.bin"))).equals(big)).toBe(true);
    expect((await bytesOf(api.read(["big.bin"]))).equals(big)).toBe(true);
    // A string, a ReadableStream, and nothing at all.
    await api.write(["s.txt"], "hello");
    expect(await readFile(join(root, "s.txt"), "utf8")).toBe("hello");
    await api.write(["r.txt"], new Blob(["from a stream"]).stream());
    expect(await readFile(join(root, "r.txt"), "utf8")).toBe("from a stream");
    await api.write(["s.txt"], new Uint8Array(0));
    expect((await readFile(join(root, "s.txt"))).length).toBe(0);
    // The content fails midway: the write is abandoned and the file keeps its old bytes.
    await writeFile(join(root, "keep"), "original");
    async function* broken() {
      yield new TextEncoder().encode("partial");
      throw new Error("the source went away");
    }
    const error = await failure(api.write(["keep"], broken()));
    if (_name === "multiplexed") expect(error.detail).toEqual({ variant: "Failed", what: "filesystem::write", error: { kind: "content", error: "the source went away" } });
    else expect(error.detail).toEqual({ variant: "Failed", what: "/filesystem/write", error: "content: the source went away" });
    expect(await readFile(join(root, "keep"), "utf8")).toBe("original");
    for (const deadline = Date.now() + 60_000; (await readdir(root)).some((f) => f.includes("diverge-write")) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
    expect((await readdir(root)).filter((f) => f.includes("diverge-write"))).toEqual([]);
    await close();
  });

  it("the proxy's errors arrive as typed FilesystemErrors", async () => {
    const url = await fresh();
    const { api, close } = await connect(url);
    const bad = await failure(bytesOf(api.read([".."])));
    expect(bad.variant).toBe("Failed");
    expect(bad.detail).toMatchObject({ error: _name === "multiplexed" ? { kind: "path", error: "path names no file" } : "path: path names no file" });
    const missing = await failure(api.write(["no", "such", "dir"], "x"));
    expect(missing.detail).toMatchObject({ error: _name === "multiplexed" ? { kind: "create", error: "No such file or directory (os error 2)" } : "create: No such file or directory (os error 2)" });
    await close();
  });

  it("an OS error carries its errno name as a typed code beside the exact text; other errors carry none (issue 26 §4)", async () => {
    const url = await fresh();
    await writeFile(join(root, "file"), "a file, not a directory");
    await mkdir(join(root, "dir"));
    const { api, close } = await connect(url);
    // The text on the wire is as the spec says ({"kind","error"} or "kind: error"); the code is read from it.
    const text = (kind: string, error: string) => (_name === "multiplexed" ? { kind, error } : `${kind}: ${error}`);
    const missing = await failure(bytesOf(api.read(["missing"])));
    expect(missing.detail).toEqual({ variant: "Failed", what: expect.any(String), error: text("open", "No such file or directory (os error 2)"), code: "ENOENT" });
    expect(missing.code).toBe("ENOENT");
    const under = await failure(api.write(["file", "x"], "x"));
    expect(under.detail).toMatchObject({ error: text("create", "Not a directory (os error 20)"), code: "ENOTDIR" });
    expect(under.code).toBe("ENOTDIR");
    const over = await failure(api.write(["dir"], "x"));
    expect(over.detail).toMatchObject({ error: text("finish", "Is a directory (os error 21)"), code: "EISDIR" });
    // Not an OS error: no code.
    const notFile = await failure(bytesOf(api.read(["dir"])));
    expect(notFile.detail).toEqual({ variant: "Failed", what: expect.any(String), error: text("open", "not a regular file") });
    expect(notFile.code).toBeUndefined();
    const bad = await failure(bytesOf(api.read([".."])));
    expect(bad.code).toBeUndefined();
    await close();
  });
});

describe("diverge fs (paths transport)", () => {
  it("write, read and tree, each run an independent opening", async () => {
    const url = await fresh();
    const source = join(base, `in-${n}`);
    const content = randomBytes(3 * 1024 * 1024);
    await writeFile(source, content);
    await run(process.execPath, [cli, "fs", "write", "/data.bin", "--in", source, "--proxy", url]);
    expect((await readFile(join(root, "data.bin"))).equals(content)).toBe(true);
    const out = join(base, `out-${n}`);
    await run(process.execPath, [cli, "fs", "read", "/data.bin", "--out", out, "--proxy", url]);
    expect((await readFile(out)).equals(content)).toBe(true);
    // stdin in, stdout out.
    const child = spawn(process.execPath, [cli, "fs", "write", "notes/x.txt", "--proxy", url], { stdio: ["pipe", "ignore", "pipe"] });
    await mkdir(join(root, "notes"));
    child.stdin.end("from stdin");
    expect(await new Promise((resolve) => child.on("close", resolve))).toBe(0);
    const { stdout } = await run(process.execPath, [cli, "fs", "read", "notes/x.txt", "--proxy", url]);
    expect(stdout).toBe("from stdin");
    const tree = await run(process.execPath, [cli, "fs", "tree", "--count", "1", "--ignore", "notes", "--proxy", url]);
    const frames = tree.stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ variant: "Snapshot", children: [{ variant: "File", name: "data.bin", size: content.length }] });
    // An error is one line on stderr and exit 7 (the exchange failed; 1 is kept for the unexpected).
    const failed = await run(process.execPath, [cli, "fs", "read", "/missing", "--proxy", url]).catch((error: { code: number; stderr: string }) => error);
    expect(failed).toMatchObject({ code: 7, stderr: "/filesystem/read: open: No such file or directory (os error 2)\n" });
  });
});
