// The tree watch's own machinery, with real directories and the kernel's own view of its watches:
// one inotify watch per watched directory (read from /proc/self/fdinfo of the process's inotify
// descriptor, so a leaked watch is seen where it lives), closed when its directory goes or the tree
// stops; the compact shadow against a Map as its model; the Snapshot written while walked equal to
// the same tree encoded whole.
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { mkdir, mkdtemp, realpath, rename, rm, symlink, writeFile as put } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeTreeMessage, encodeFiletreeFrame, encodeTreeMessage, type FiletreeFrame } from "@diverge/codec";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { joined, messageHead, watchTree, watchTreeEncoded } from "../src/families/filesystem/index.js";
import { DirShadow, fileSig, linkSig } from "../src/families/filesystem/shadow.js";
import { watchStats } from "../src/families/filesystem/tree.js";

let base: string;
let root: string;
/** The watches a test opened: each is stopped before the test's directory is removed. */
let opened: { return?(): Promise<unknown> }[] = [];

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-tree-watch-")));
  root = join(base, "root");
  await mkdir(root);
  opened = [];
});

// Ordered: the watches stop first, then their directory goes (a test that failed midway never
// stopped its own). Fixtures are written synchronously, so no loop of a timed-out test is still
// filling the directory while it is removed.
afterEach(async () => {
  for (const watch of opened.splice(0)) await watch.return?.();
  await rm(base, { recursive: true, force: true });
});

/** Registers a watch to be stopped after the test, whatever the test did. */
function held<T extends { return?(): Promise<unknown> }>(watch: T): T {
  opened.push(watch);
  return watch;
}

/** The inotify watches this process holds now, as the kernel lists them. */
function inotifyWatches(): number {
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue;
    }
    if (target !== "anon_inode:inotify") continue;
    count += readFileSync(`/proc/self/fdinfo/${fd}`, "utf8").split("\n").filter((line) => line.startsWith("inotify wd:")).length;
  }
  return count;
}

/** A bound on waiting for a condition: a hang guard for a loaded machine, not a speed target. */
const PATIENCE_MS = 60_000;

/** Waits until `check` holds (the kernel drops a watch a moment after its directory goes), or fails. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const at = (frame: FiletreeFrame) => ("path" in frame ? frame.path.join("/") : "");

async function until(frames: AsyncIterator<FiletreeFrame>, match: (frame: FiletreeFrame) => boolean): Promise<FiletreeFrame> {
  for (;;) {
    const next = await Promise.race([frames.next(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no frame in ${PATIENCE_MS} ms`)), PATIENCE_MS).unref())]);
    if (next.done) throw new Error("the tree ended");
    if (match(next.value)) return next.value;
  }
}

describe("one inotify watch per watched directory, none left behind", () => {
  it("watches the root and every directory, closes a removed subtree's watches, and all of them on stop", async () => {
    const start = inotifyWatches();
    const open = watchStats.open;
    // Held by the watch and by the kernel alike (the kernel drops a removed directory's watch by itself; the watch must too).
    const watching = (n: number) => inotifyWatches() - start === n && watchStats.open - open === n;
    await mkdir(join(root, "a", "b", "c"), { recursive: true });
    await mkdir(join(root, "d"));
    await mkdir(join(root, "workspace", "deep"), { recursive: true });
    await put(join(root, "a", "b", "f"), "x");
    const frames = held(watchTree(root, { ignore: [["workspace"]] }));
    expect((await frames.next()).value?.variant).toBe("Snapshot");
    // root, a, a/b, a/b/c, d: the left-out workspace is never watched.
    expect(watching(5)).toBe(true);

    await mkdir(join(root, "new", "inner"), { recursive: true });
    await until(frames, (f) => at(f) === "new" && f.variant === "Inserted");
    await eventually(() => watching(7), "new and new/inner watched");

    await rm(join(root, "a"), { recursive: true });
    await until(frames, (f) => at(f) === "a" && f.variant === "Removed");
    await eventually(() => watching(4), "a's three watches closed");

    // A directory replaced by a file at the same name: its watch goes with it.
    await rm(join(root, "d"), { recursive: true });
    await put(join(root, "d"), "now a file");
    await until(frames, (f) => at(f) === "d" && (f.variant === "Modified" || f.variant === "Inserted") && f.node.variant === "File");
    await eventually(() => watching(3), "d's watch closed");

    await frames.return!();
    await eventually(() => watching(0), "every watch closed on stop");
  });

  it("a directory renamed is Removed then Inserted, and the watch under its new name tells what is made in it", async () => {
    await mkdir(join(root, "old", "sub"), { recursive: true });
    const frames = held(watchTree(root, { ignore: [] }));
    await frames.next();
    await rename(join(root, "old"), join(root, "renamed"));
    const both = [await until(frames, (f) => at(f) === "old" || at(f) === "renamed"), await until(frames, (f) => at(f) === "old" || at(f) === "renamed")];
    expect(both.map((f) => `${f.variant} ${at(f)}`).sort()).toEqual(["Inserted renamed", "Removed old"]);
    await put(join(root, "renamed", "sub", "made"), "x");
    expect(await until(frames, (f) => at(f).startsWith("renamed/sub/made") || at(f) === "renamed/sub")).toMatchObject({ variant: expect.stringMatching(/Inserted|Modified/) });
    await frames.return!();
  });
});

describe("a cap on the directories watched (maxWatches, diverge-proxy --max-tree-watches)", () => {
  it("sends the directories past it with changes: false and tells nothing under them, while the watched ones tell every change", async () => {
    for (const d of ["a", "b", "c", "d"]) await mkdir(join(root, d));
    const open = watchStats.open;
    const frames = held(watchTree(root, { ignore: [], maxWatches: 3 }));
    const first = await frames.next();
    if (first.done || first.value.variant !== "Snapshot") throw new Error("no Snapshot");
    const dirs = first.value.children as Extract<FiletreeFrame, { variant: "Snapshot" }>["children"];
    // The root takes one watch; two of the four directories take the rest, in the order they were listed.
    const watched = dirs.filter((n) => n.variant === "Directory" && n.changes).map((n) => n.name);
    const unwatched = dirs.filter((n) => n.variant === "Directory" && !n.changes).map((n) => n.name);
    expect(watched).toHaveLength(2);
    expect(unwatched).toHaveLength(2);
    expect(watchStats.open - open).toBe(3);
    await put(join(root, unwatched[0]!, "unseen"), "x");
    await put(join(root, watched[0]!, "seen"), "x");
    const seen = `${watched[0]}/seen`;
    expect(at(await until(frames, (f) => at(f).endsWith("seen")))).toBe(seen);
    // The change in the unwatched directory never comes: past the watched file's own frames (its
    // write may be an Inserted of 0 bytes, then a Modified), the next is the root's marker.
    await put(join(root, "marker"), "x");
    expect(at(await until(frames, (f) => at(f) !== seen))).toBe("marker");
    await frames.return!();
  });
});

describe("the Snapshot written while walked", () => {
  it("is the transport's whole message, byte for byte the same tree encoded whole, with its pieces never empty", async () => {
    await mkdir(join(root, "etc"));
    await put(join(root, "etc", "hostname"), "box\n");
    await symlink("hostname", join(root, "etc", "name"));
    mkdirSync(join(root, "many"));
    // Enough names (some not ASCII) for the message to span several of the writer's chunks.
    for (let i = 0; i < 6000; i++) writeFileSync(join(root, "many", `file-${i}-${"é".repeat(i % 5)}.txt`), "");
    const head = messageHead((frame) => encodeTreeMessage({ variant: "Frame", frame }));
    const watch = held(watchTreeEncoded(root, { ignore: [], head, maxBytes: 16 * 1024 * 1024 }));
    const first = await watch.next();
    await watch.return();
    if (first.done || first.value.variant !== "EncodedSnapshot") throw new Error("no Snapshot");
    const snapshot = first.value;
    expect(snapshot.parts.length).toBeGreaterThan(2);
    expect(snapshot.parts.every((part) => part.length > 0)).toBe(true);
    expect(snapshot.parts.reduce((sum, part) => sum + part.length, 0)).toBe(snapshot.length);
    const message = joined(snapshot);
    const decoded = decodeTreeMessage(message);
    if (decoded.variant !== "Frame" || decoded.frame.variant !== "Snapshot") throw new Error("not a Snapshot message");
    expect(Buffer.from(message).equals(Buffer.from(encodeTreeMessage({ variant: "Frame", frame: decoded.frame })))).toBe(true);
    expect(decoded.frame.children.find((n) => n.name === "many")).toMatchObject({ variant: "Directory", changes: true });
    const many = decoded.frame.children.find((n) => n.name === "many") as Extract<FiletreeFrame, { variant: "Snapshot" }>["children"][number] & { children: unknown[] };
    expect(many.children).toHaveLength(6000);
    expect(encodeFiletreeFrame(decoded.frame).length).toBe(message.length - head.length);
    // 6000 files written, walked and decoded: seconds on a loaded machine; the bound is a hang guard.
  }, 120_000);

  it("a Snapshot over the limit ends the tree saying its exact size, holding no more than the limit meanwhile", async () => {
    for (let i = 0; i < 3000; i++) writeFileSync(join(root, `f${i}`), "");
    const values = held(watchTree(root, { ignore: [] }));
    const whole = await values.next();
    await values.return!();
    const size = encodeFiletreeFrame(whole.value as FiletreeFrame).length;
    const watch = held(watchTreeEncoded(root, { ignore: [], head: new Uint8Array(0), maxBytes: 1000 }));
    await expect(watch.next()).rejects.toMatchObject({ kind: "walk", error: `the snapshot is ${size} bytes, more than the message limit of 1000 bytes; leave part of the tree out (ignore)` });
  }, 120_000);
});

describe("the compact shadow", () => {
  type Model = Map<string, number | "dir">;
  const name = fc.oneof(fc.string({ minLength: 1, maxLength: 6 }).filter((s) => !s.includes("/")), fc.constantFrom("a", "b", "é", "𝄞", "a\u0301", "Z", "zz"));
  const op = fc.oneof(
    fc.record({ kind: fc.constant("set" as const), name, sig: fc.integer({ min: 0, max: 2 ** 53 - 1 }) }),
    fc.record({ kind: fc.constant("dir" as const), name }),
    fc.record({ kind: fc.constant("delete" as const), name }),
  );

  it("answers as a Map does, through any mix of sets, directories and deletes (the overlay merged as it grows)", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(name, fc.integer({ min: 0, max: 2 ** 53 - 1 })), { selector: (e) => e[0], maxLength: 80 }), fc.array(op, { maxLength: 300 }), (initial, ops) => {
        const model: Model = new Map(initial);
        const shadow = DirShadow.of(initial);
        const dirs = new Map<string, DirShadow>();
        for (const o of ops) {
          if (o.kind === "set") {
            shadow.set(o.name, o.sig);
            model.set(o.name, o.sig);
          } else if (o.kind === "dir") {
            const dir = DirShadow.of([]);
            dirs.set(o.name, dir);
            shadow.set(o.name, dir);
            model.set(o.name, "dir");
          } else {
            shadow.delete(o.name);
            model.delete(o.name);
          }
        }
        for (const [key, value] of model) {
          const got = shadow.get(key);
          if (value === "dir") expect(got).toBe(dirs.get(key));
          else expect(got).toBe(value);
        }
        for (const o of ops) if (!model.has(o.name)) expect(shadow.get(o.name)).toBeUndefined();
        expect(new Map([...shadow.entries()].map(([k, v]) => [k, typeof v === "number" ? v : "dir"]))).toEqual(model);
      }),
      { numRuns: 200 },
    );
  });

  it("is built from a listing as given: present entries only, subdirectories by name", () => {
    const names = ["zeta", "alpha", "gone", "sub", "Ω", "beta"];
    const present = Uint8Array.from([1, 1, 0, 2, 1, 1]);
    const sigs = Float64Array.from([1, 2, 3, 0, 5, 6]);
    const sub = DirShadow.of([]);
    const shadow = DirShadow.ofListing(names, present, sigs, new Map([["sub", sub]]));
    expect(shadow.get("zeta")).toBe(1);
    expect(shadow.get("alpha")).toBe(2);
    expect(shadow.get("gone")).toBeUndefined();
    expect(shadow.get("sub")).toBe(sub);
    expect(shadow.get("Ω")).toBe(5);
    expect(shadow.get("beta")).toBe(6);
    expect(shadow.get("alph")).toBeUndefined();
    expect(shadow.get("alphaa")).toBeUndefined();
  });

  it("gives different signatures to nodes that differ in size, times or target, and equal ones to equal nodes", () => {
    expect(fileSig(4n, 1n, 2n)).toBe(fileSig(4n, 1n, 2n));
    const files = [fileSig(4n, 1n, 2n), fileSig(5n, 1n, 2n), fileSig(4n, null, 2n), fileSig(4n, 1n, 3n), fileSig(null, 1n, 2n), fileSig(2n ** 40n, 1n, 2n)];
    const links = [linkSig(["a", "b"], 1n, 2n), linkSig(["ab"], 1n, 2n), linkSig(["a", "b"], 1n, 3n), linkSig([], 1n, 2n)];
    expect(new Set([...files, ...links]).size).toBe(files.length + links.length);
    for (const sig of [...files, ...links]) expect(Number.isSafeInteger(sig) && sig >= 0).toBe(true);
  });
});
