// The filesystem service with real files in temporary directories: exact path checks, every way
// out of the root we could think of, reads in pieces with backpressure, writes that are whole or
// absent, and a live tree watch.
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rename, rm, stat, symlink, truncate, writeFile as put } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FiletreeFrame, FiletreeNode } from "@diverge/codec";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkPath, ContentError, FsError, lexical, prepareWrite, readPieces, watchTree, writeFile } from "../src/families/filesystem/index.js";
import { watchStats } from "../src/families/filesystem/tree.js";

let base: string;
let root: string;
let outside: string;

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fs-")));
  root = join(base, "root");
  outside = join(base, "outside");
  await mkdir(root);
  await mkdir(outside);
  await put(join(outside, "secret"), "SECRET");
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

async function readAll(path: unknown, chunkSize?: number): Promise<Uint8Array[]> {
  const pieces: Uint8Array[] = [];
  for await (const piece of readPieces(root, path, { chunkSize })) pieces.push(piece.slice());
  return pieces;
}

async function fsError(run: () => Promise<unknown>): Promise<FsError> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(FsError);
    return error as FsError;
  }
  throw new Error("it succeeded");
}

const text = (pieces: Uint8Array[]) => Buffer.concat(pieces).toString();

describe("paths", () => {
  it("accepts only non-empty arrays of names", () => {
    expect(checkPath(["etc", "hostname"])).toEqual(["etc", "hostname"]);
    expect(checkPath(["..."])).toEqual(["..."]);
    for (const bad of [[], [""], ["."], [".."], ["a", ".."], ["a/b"], ["/"], ["a\0b"], [1], "etc", null, undefined, { 0: "a" }]) {
      expect(checkPath(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });
  it("resolves link targets lexically, never above the root", () => {
    expect(lexical(["etc"], "hostname")).toEqual(["etc", "hostname"]);
    expect(lexical(["a", "b"], "../../../x/./y")).toEqual(["x", "y"]);
    expect(lexical(["a"], "/etc//hosts")).toEqual(["etc", "hosts"]);
  });
});

describe("read", () => {
  it("sends a file in pieces of at most the chunk size, in order", async () => {
    const bytes = Buffer.alloc(5 * 1024 * 1024 + 7);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31) & 0xff;
    await put(join(root, "big"), bytes);
    const pieces = await readAll(["big"]);
    expect(pieces.map((p) => p.length)).toEqual([2097152, 2097152, 1048583]);
    expect(Buffer.concat(pieces).equals(bytes)).toBe(true);
  });

  it("sends a zero-byte file as one empty piece, and a file of exactly one chunk as one piece", async () => {
    await put(join(root, "empty"), "");
    expect((await readAll(["empty"])).map((p) => p.length)).toEqual([0]);
    await put(join(root, "four"), "abcd");
    expect((await readAll(["four"], 4)).map((p) => p.length)).toEqual([4]);
  });

  it("reads only when the next piece is asked for", async () => {
    await put(join(root, "f"), "aaaabbbbcccc");
    const pieces = readPieces(root, ["f"], { chunkSize: 4 });
    expect(Buffer.from((await pieces.next()).value as Uint8Array).toString()).toBe("aaaa");
    // Nothing was read ahead: a change after the first piece shows in the next.
    await put(join(root, "f"), "aaaaBBBBCCCC");
    expect(Buffer.from((await pieces.next()).value as Uint8Array).toString()).toBe("BBBB");
    await pieces.return();
  });

  it("fails with the spec's errors: bad path, missing, a directory", async () => {
    expect((await fsError(() => readAll([".."]))).toJSON()).toEqual({ kind: "path", error: "path names no file" });
    expect((await fsError(() => readAll(["nope"]))).toJSON()).toEqual({ kind: "open", error: "No such file or directory (os error 2)" });
    await mkdir(join(root, "d"));
    expect((await fsError(() => readAll(["d"]))).toJSON()).toEqual({ kind: "open", error: "not a regular file" });
  });

  it("an OS error's FsError carries its errno name (`code`) beside the exact text, which alone is sent (issue 26 §4)", async () => {
    const missing = await fsError(() => readAll(["nope"]));
    expect([missing.code, missing.error, JSON.stringify(missing)]).toEqual(["ENOENT", "No such file or directory (os error 2)", '{"kind":"open","error":"No such file or directory (os error 2)"}']);
    await put(join(root, "file"), "x");
    expect((await fsError(() => writeFile(root, ["file", "f"], []))).code).toBe("ENOTDIR");
    await mkdir(join(root, "d"));
    expect((await fsError(() => writeFile(root, ["d"], [Buffer.from("x")]))).code).toBe("EISDIR");
    expect((await fsError(() => watchTree(join(root, "missing"), { ignore: [] }).next())).code).toBe("ENOENT");
    // Not an OS error: no code.
    expect((await fsError(() => readAll(["d"]))).code).toBeUndefined();
    expect((await fsError(() => readAll([".."]))).code).toBeUndefined();
  });

  it("follows links that stay inside the root", async () => {
    await mkdir(join(root, "etc"));
    await put(join(root, "etc", "real"), "inside");
    await symlink("real", join(root, "etc", "rel"));
    await symlink("etc", join(root, "up"));
    expect(text(await readAll(["etc", "rel"]))).toBe("inside");
    expect(text(await readAll(["up", "real"]))).toBe("inside");
  });

  it("never reads outside the root, whatever the links", async () => {
    await symlink(join(outside, "secret"), join(root, "abs"));
    await symlink("../outside/secret", join(root, "rel"));
    await symlink(outside, join(root, "dir"));
    await symlink("../outside", join(root, "dirrel"));
    await mkdir(join(root, "a"));
    await symlink("../../outside/secret", join(root, "a", "deep"));
    await symlink("loop2", join(root, "loop1"));
    await symlink("loop1", join(root, "loop2"));
    for (const path of [["abs"], ["rel"], ["dir", "secret"], ["dirrel", "secret"], ["a", "deep"]]) {
      const error = await fsError(() => readAll(path));
      expect(error.toJSON(), path.join("/")).toEqual({ kind: "open", error: "the path leads outside the root" });
    }
    expect((await fsError(() => readAll(["loop1"]))).error).toBe("Too many levels of symbolic links (os error 40)");
    // Encodings are names, never decoded.
    for (const path of [["%2e%2e", "outside", "secret"], ["..%2f", "secret"], ["\u2025", "secret"]]) {
      expect((await fsError(() => readAll(path))).kind).toBe("open");
    }
    for (const path of [["..", "outside", "secret"], ["a", "..", "..", "outside", "secret"], ["a/../../outside/secret"]]) {
      expect((await fsError(() => readAll(path))).kind).toBe("path");
    }
  });

  it("never reads outside the root while a directory is swapped for a link to outside", async () => {
    await mkdir(join(root, "d"));
    await put(join(root, "d", "secret"), "inside");
    await mkdir(join(root, "real"));
    await put(join(root, "real", "secret"), "inside");
    let swapping = true;
    const swapper = (async () => {
      // Flip root/d between a real directory and a link to the outside, as fast as we can.
      while (swapping) {
        await rename(join(root, "d"), join(root, "parked")).catch(() => undefined);
        await symlink(outside, join(root, "d")).catch(() => undefined);
        await new Promise((r) => setImmediate(r));
        await rm(join(root, "d"), { force: true }).catch(() => undefined);
        await rename(join(root, "parked"), join(root, "d")).catch(() => undefined);
      }
    })();
    let inside = 0;
    let refused = 0;
    try {
      for (let i = 0; i < 1000; i++) {
        try {
          const got = text(await readAll(["d", "secret"]));
          expect(got).toBe("inside");
          inside++;
        } catch (error) {
          expect(error).toBeInstanceOf(FsError);
          refused++;
        }
      }
    } finally {
      swapping = false;
      await swapper;
    }
    expect(inside + refused).toBe(1000);
  });
});

describe("write", () => {
  const dir = async () => (await readdir(root)).sort();

  it("writes the pieces whole, and no pieces as a zero-byte file", async () => {
    await writeFile(root, ["f"], [Buffer.from("hel"), Buffer.from(""), Buffer.from("lo")]);
    expect(await readFile(join(root, "f"), "utf8")).toBe("hello");
    await writeFile(root, ["z"], []);
    expect((await stat(join(root, "z"))).size).toBe(0);
    expect(await dir()).toEqual(["f", "z"]);
  });

  it("replaces a file keeping its permission bits, and replaces a link rather than writing through it", async () => {
    await put(join(root, "f"), "old");
    await chmod(join(root, "f"), 0o640);
    await writeFile(root, ["f"], [Buffer.from("new")]);
    expect(await readFile(join(root, "f"), "utf8")).toBe("new");
    expect((await stat(join(root, "f"))).mode & 0o777).toBe(0o640);
    await put(join(root, "target"), "target");
    await symlink("target", join(root, "link"));
    await writeFile(root, ["link"], [Buffer.from("written")]);
    expect((await lstat(join(root, "link"))).isFile()).toBe(true);
    expect(await readFile(join(root, "target"), "utf8")).toBe("target");
  });

  it("leaves the destination unchanged and no temporary when the content fails, is abandoned, or is aborted", async () => {
    await put(join(root, "f"), "original");
    async function* failing() {
      yield Buffer.from("part");
      throw new ContentError({ kind: "provider" });
    }
    await expect(writeFile(root, ["f"], failing())).rejects.toBeInstanceOf(ContentError);
    expect(await readFile(join(root, "f"), "utf8")).toBe("original");
    const controller = new AbortController();
    async function* slow() {
      yield Buffer.from("part");
      controller.abort();
      yield Buffer.from("more");
    }
    await expect(writeFile(root, ["f"], slow(), { signal: controller.signal })).rejects.toThrow(/abort/i);
    const prepared = await prepareWrite(root, ["g"]);
    expect((await dir()).some((n) => n.startsWith(".g.diverge-write-"))).toBe(true);
    await prepared.abandon();
    expect(await dir()).toEqual(["f"]);
    expect(await readFile(join(root, "f"), "utf8")).toBe("original");
  });

  it("fails with the spec's kinds: bad path, missing parent, parent a file, destination a directory", async () => {
    expect((await fsError(() => writeFile(root, [], []))).toJSON()).toEqual({ kind: "path", error: "path names no file" });
    expect((await fsError(() => writeFile(root, ["no", "f"], []))).toJSON()).toEqual({ kind: "create", error: "No such file or directory (os error 2)" });
    await put(join(root, "file"), "x");
    expect((await fsError(() => writeFile(root, ["file", "f"], []))).toJSON()).toEqual({ kind: "create", error: "Not a directory (os error 20)" });
    await mkdir(join(root, "d"));
    await put(join(root, "d", "keep"), "x");
    expect((await fsError(() => writeFile(root, ["d"], [Buffer.from("x")]))).kind).toBe("finish");
    expect(await dir()).toEqual(["d", "file"]);
  });

  it("never writes outside the root, whatever the links", async () => {
    await symlink(outside, join(root, "out"));
    await symlink("../outside", join(root, "outrel"));
    for (const path of [["out", "f"], ["outrel", "f"]]) {
      expect((await fsError(() => writeFile(root, path, [Buffer.from("x")]))).toJSON()).toEqual({ kind: "create", error: "the path leads outside the root" });
    }
    for (const path of [["..", "outside", "f"], ["a/../../outside/f"]]) expect((await fsError(() => writeFile(root, path, []))).kind).toBe("path");
    expect((await readdir(outside)).sort()).toEqual(["secret"]);
  });

  it("never writes outside the root while a directory is swapped for a link to outside", async () => {
    await mkdir(join(root, "d"));
    let swapping = true;
    const swapper = (async () => {
      while (swapping) {
        await rename(join(root, "d"), join(root, "parked")).catch(() => undefined);
        await symlink(outside, join(root, "d")).catch(() => undefined);
        await new Promise((r) => setImmediate(r));
        await rm(join(root, "d"), { force: true }).catch(() => undefined);
        await rename(join(root, "parked"), join(root, "d")).catch(() => undefined);
      }
    })();
    try {
      for (let i = 0; i < 300; i++) await writeFile(root, ["d", `f${i}`], [Buffer.from("x")]).catch((error) => expect(error).toBeInstanceOf(FsError));
    } finally {
      swapping = false;
      await swapper;
    }
    expect((await readdir(outside)).sort()).toEqual(["secret"]);
  });
});

// ---- tree ------------------------------------------------------------------------------------------

async function next(frames: AsyncIterator<FiletreeFrame>, ms = 60_000): Promise<FiletreeFrame> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("no frame in time")), ms)));
  try {
    const result = await Promise.race([frames.next(), timeout]);
    if (result.done) throw new Error("the watch ended");
    return result.value;
  } finally {
    clearTimeout(timer);
  }
}

/** Frames until one matches, skipping replays. */
async function until(frames: AsyncIterator<FiletreeFrame>, match: (f: FiletreeFrame) => boolean): Promise<FiletreeFrame> {
  for (;;) {
    const frame = await next(frames);
    if (match(frame)) return frame;
  }
}

const names = (nodes: readonly FiletreeNode[]) => nodes.map((n) => `${n.variant}:${n.name}`).sort();
const at = (f: FiletreeFrame) => ("path" in f ? f.path.join("/") : "");

describe("tree", () => {
  it("starts with a snapshot: files, directories with their subtrees, links unresolved; left-out paths absent", async () => {
    await mkdir(join(root, "etc"));
    await put(join(root, "etc", "hostname"), "box\n");
    await symlink("hostname", join(root, "etc", "name"));
    await symlink("/nowhere/at/all", join(root, "dangling"));
    for (const d of ["proc", "sys", "dev", "workspace", "keep"]) await mkdir(join(root, d));
    await put(join(root, "workspace", "x"), "x");
    const frames = watchTree(root, { ignore: [["workspace"], [], ["bad/name"], [".."], "nope"] });
    const snapshot = await next(frames);
    await frames.return!();
    expect(snapshot.variant).toBe("Snapshot");
    const children = (snapshot as { children: FiletreeNode[] }).children;
    expect(names(children)).toEqual(["Directory:etc", "Directory:keep", "Symlink:dangling"]);
    const etc = children.find((n) => n.name === "etc") as Extract<FiletreeNode, { variant: "Directory" }>;
    expect(etc.changes).toBe(true);
    const hostname = etc.children.find((n) => n.name === "hostname")!;
    expect(hostname).toMatchObject({ variant: "File", size: 4n });
    expect(typeof (hostname as { modified_at: unknown }).modified_at).toBe("bigint");
    expect(etc.children.find((n) => n.name === "name")).toMatchObject({ variant: "Symlink", path: ["etc", "hostname"] });
    expect(children.find((n) => n.name === "dangling")).toMatchObject({ variant: "Symlink", path: ["nowhere", "at", "all"] });
  });

  it("sends one delta per change with complete values; a rename is Removed then Inserted", async () => {
    await mkdir(join(root, "src"));
    const frames = watchTree(root, { ignore: [] });
    expect((await next(frames)).variant).toBe("Snapshot");

    await put(join(root, "src", "main.rs"), "fn main() {}");
    const created = await until(frames, (f) => at(f) === "src/main.rs");
    expect(created).toMatchObject({ variant: "Inserted", node: { variant: "File", name: "main.rs" } });
    // writeFile creates the file, then writes it: a busy machine can let the watch stat it in
    // between, which is an Inserted of 0 bytes and then a Modified of 12, each a complete value.
    if ((created as { node: { size: bigint } }).node.size !== 12n) {
      expect(created).toMatchObject({ node: { size: 0n } });
      expect(await until(frames, (f) => at(f) === "src/main.rs")).toMatchObject({ variant: "Modified", node: { variant: "File", name: "main.rs", size: 12n } });
    }

    await truncate(join(root, "src", "main.rs"), 2);
    expect(await until(frames, (f) => at(f) === "src/main.rs" && f.variant === "Modified" && (f.node as { size: bigint }).size === 2n)).toMatchObject({ variant: "Modified" });

    await rename(join(root, "src", "main.rs"), join(root, "src", "lib.rs"));
    const renamed = [await until(frames, (f) => at(f) === "src/main.rs" || at(f) === "src/lib.rs"), await until(frames, (f) => at(f) === "src/main.rs" || at(f) === "src/lib.rs")];
    expect(renamed.map((f) => `${f.variant} ${at(f)}`).sort()).toEqual(["Inserted src/lib.rs", "Removed src/main.rs"]);

    await mkdir(join(root, "a", "b", "c"), { recursive: true });
    await put(join(root, "a", "b", "c", "deep"), "x");
    const inserted = await until(frames, (f) => at(f) === "a");
    expect(inserted.variant).toBe("Inserted");

    await rm(join(root, "a"), { recursive: true });
    expect(await until(frames, (f) => at(f) === "a" && f.variant === "Removed")).toEqual({ variant: "Removed", path: ["a"] });
    await frames.return!();
  });

  it("each directory's own inotify watch tells each change once, in order (also in a directory made after the snapshot)", async () => {
    const outside = await realpath(await mkdtemp(join(tmpdir(), "diverge-fs-outside-")));
    try {
      const frames = watchTree(root, { ignore: [] });
      expect((await next(frames)).variant).toBe("Snapshot");
      const before = watchStats.events;
      const seen: string[] = [];
      // Frames up to the one `until` names. A whole `Modified d1` may come between: an event for d1
      // itself can find d1's time moved to another second when f arrived in it, and send d1 whole,
      // with f in it (a correct delta, when it comes is the machine's timing).
      const take = async (until: string) => {
        for (;;) {
          const frame = await next(frames, 20_000);
          const line = `${frame.variant} ${at(frame)}`;
          seen.push(line);
          if (line === until) return;
          if (line === "Modified d1" && until === "Inserted d1/f") return;
        }
      };
      await mkdir(join(root, "d1"));
      await take("Inserted d1");
      // Made whole outside the root and moved in: one change.
      await put(join(outside, "f"), "twelve bytes");
      await rename(join(outside, "f"), join(root, "d1", "f"));
      await take("Inserted d1/f");
      await truncate(join(root, "d1", "f"), 2);
      await take("Modified d1/f");
      await rm(join(root, "d1", "f"));
      await take("Removed d1/f");
      // Every change once, in order: a replayed event for one finds nothing new.
      const changesOfF = seen.filter((line) => line !== "Modified d1");
      expect(changesOfF).toEqual(seen.includes("Modified d1") && !seen.includes("Inserted d1/f") ? ["Inserted d1", "Modified d1/f", "Removed d1/f"] : ["Inserted d1", "Inserted d1/f", "Modified d1/f", "Removed d1/f"]);
      expect(seen.filter((line) => line === "Modified d1").length).toBeLessThanOrEqual(2);
      expect(watchStats.events - before).toBeGreaterThanOrEqual(4);
      await frames.return!();
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it("reports nothing under a left-out path", async () => {
    await mkdir(join(root, "workspace"));
    await mkdir(join(root, "proc"));
    const frames = watchTree(root, { ignore: [["workspace"]] });
    await next(frames);
    await put(join(root, "workspace", "x"), "x");
    await put(join(root, "proc", "x"), "x");
    await put(join(root, "marker"), "x");
    expect(at(await next(frames))).toBe("marker");
    await frames.return!();
  });

  it("sends a fresh snapshot when a slow reader lost frames", async () => {
    const frames = watchTree(root, { ignore: [], maxQueued: 3 });
    expect((await next(frames)).variant).toBe("Snapshot");
    for (let i = 0; i < 20; i++) await put(join(root, `f${i}`), "x");
    await new Promise((r) => setTimeout(r, 500));
    // A fresh Snapshot comes, and it and the deltas after it (changes seen after the resync) make the 20 files.
    const known = new Set<string>();
    let snapshots = 0;
    while (snapshots === 0 || known.size < 20) {
      const frame = await next(frames);
      if (frame.variant === "Snapshot") {
        snapshots++;
        known.clear();
        for (const node of frame.children) known.add(node.name);
      } else if (frame.variant === "Inserted") known.add(at(frame));
      else if (frame.variant === "Removed") known.delete(at(frame));
    }
    expect(snapshots).toBeGreaterThan(0);
    expect(known.size).toBe(20);
    await frames.return!();
  });

  it("ends on stop (return or abort) and fails with watch when the root cannot be watched", async () => {
    const controller = new AbortController();
    const frames = watchTree(root, { ignore: [], signal: controller.signal });
    await next(frames);
    const pending = frames.next();
    controller.abort();
    expect(await pending).toEqual({ value: undefined, done: true });
    expect(await frames.next()).toEqual({ value: undefined, done: true });
    const missing = watchTree(join(root, "missing"), { ignore: [] });
    const error = await fsError(() => missing.next());
    expect(error.kind).toBe("watch");
  });

  it("leaves no link target unread and no link followed", async () => {
    await symlink(outside, join(root, "out"));
    const frames = watchTree(root, { ignore: [] });
    const snapshot = (await next(frames)) as { children: FiletreeNode[] };
    await frames.return!();
    expect(snapshot.children).toEqual([{ variant: "Symlink", name: "out", path: outside.split("/").filter(Boolean), created_at: expect.anything(), modified_at: expect.anything() }]);
    expect(await readlink(join(root, "out"))).toBe(outside);
  });
});
