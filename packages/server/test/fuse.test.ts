// Real kernel FUSE mounts served by handlers backed by a real directory. Every operation inside the
// mount runs in a child process, as a container's program would (this process serves the mount).
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { FiletreeNode } from "@diverge/codec";
import { watchTree } from "../src/families/filesystem/index.js";
import { askThrough, directoryHandlers, fuseUnavailable, isMountPoint, mountFuse, MountError, serveAsk, type FuseHandlers, type FuseMount } from "../src/families/fuse/index.js";

/** The provider's directory served directly, or through the generated ask and answer frames (bytes both ways). */
const backends: [string, (dir: string) => FuseHandlers][] = [
  ["handlers", (dir) => directoryHandlers(dir)],
  ["ask and answer frames", (dir) => askThrough((ask) => serveAsk(directoryHandlers(dir), ask))],
];

const unavailable = fuseUnavailable();
if (unavailable) console.log(`FUSE tests skipped: ${unavailable}`);

let base: string;
let provider: string;
let mounts: FuseMount[] = [];

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fuse-")));
  provider = join(base, "provider");
  await mkdir(provider);
});

afterEach(async () => {
  for (const m of mounts) await m.close();
  mounts = [];
  await rm(base, { recursive: true, force: true });
});

async function mount(path: string, kind: "file" | "directory", handlers: FuseHandlers): Promise<FuseMount> {
  const m = await mountFuse({ path, kind, handlers });
  mounts.push(m);
  return m;
}

/** Runs a script of `node:fs/promises` calls in a child process; returns what it prints as JSON. */
function program(script: string): Promise<any> {
  const source = `import * as fs from "node:fs/promises"; const out = await (async () => { ${script} })(); process.stdout.write(JSON.stringify(out ?? null));`;
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ["--input-type=module", "-e", source], { timeout: 30_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout)))),
  );
}

function sh(command: string): Promise<string> {
  return new Promise((resolve, reject) => execFile("sh", ["-c", command], { timeout: 60_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${command}: ${stderr || error.message}`)) : resolve(stdout))));
}

/** The error code a call inside the mount ends with, or "ok". */
const code = (call: string) => `try { await ${call}; return "ok"; } catch (e) { return e.code; }`;

describe.skipIf(!!unavailable)("FUSE mounts", () => {
  for (const [label, backend] of backends) {
  it(`serves ordinary file operations on a directory mount from the provider's directory (${label})`, async () => {
    const at = join(base, "container", "workspace");
    await mount(at, "directory", backend(provider));
    await writeFile(join(provider, "hello.txt"), "from the provider");
    const result = await program(`
      const at = ${JSON.stringify(at)};
      const read = await fs.readFile(at + "/hello.txt", "utf8");
      await fs.writeFile(at + "/new.txt", "from the program");
      await fs.mkdir(at + "/dir");
      await fs.writeFile(at + "/dir/inner", "x".repeat(100));
      await fs.rename(at + "/dir/inner", at + "/dir/moved");
      await fs.truncate(at + "/dir/moved", 10);
      await fs.chmod(at + "/new.txt", 0o600);
      await fs.utimes(at + "/new.txt", 1700000000, 1700000000);
      const s = await fs.stat(at + "/new.txt");
      const listing = (await fs.readdir(at)).sort();
      await fs.writeFile(at + "/gone", "");
      await fs.unlink(at + "/gone");
      const notEmpty = await (async () => { ${code("fs.rmdir(at + '/dir')")} })();
      return { read, listing, mode: s.mode & 0o777, mtime: s.mtimeMs, size: (await fs.stat(at + "/dir/moved")).size, notEmpty, missing: await (async () => { ${code("fs.readFile(at + '/nope')")} })() };
    `);
    expect(result).toEqual({ read: "from the provider", listing: ["dir", "hello.txt", "new.txt"], mode: 0o600, mtime: 1700000000000, size: 10, notEmpty: "ENOTEMPTY", missing: "ENOENT" });
    expect(await readFile(join(provider, "new.txt"), "utf8")).toBe("from the program");
    expect(await readFile(join(provider, "dir", "moved"), "utf8")).toBe("x".repeat(10));
    expect((await stat(join(provider, "new.txt"))).mode & 0o777).toBe(0o600);
    expect((await readdir(provider)).sort()).toEqual(["dir", "hello.txt", "new.txt"]);
  });

  it(`copies a tree in with cp -r and back out with tar, byte for byte, and reads and writes a large file in pieces (${label})`, async () => {
    const at = join(base, "mnt");
    await mount(at, "directory", backend(provider));
    const source = join(base, "source");
    await mkdir(join(source, "a", "b"), { recursive: true });
    for (let i = 0; i < 20; i++) await writeFile(join(source, "a", i % 2 ? "b" : "", `f${i}`), `file ${i}\n`.repeat(i * 50));
    const big = Buffer.alloc(5 * 1024 * 1024 + 3);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7 + 3) & 0xff;
    await writeFile(join(source, "big"), big);
    await sh(`cp -r ${source}/. ${at}/`);
    expect((await readFile(join(provider, "big"))).equals(big)).toBe(true);
    await sh(`cd ${at} && tar cf ${base}/out.tar . && mkdir ${base}/extracted && tar xf ${base}/out.tar -C ${base}/extracted`);
    expect(await sh(`diff -r ${source} ${base}/extracted && echo same`)).toBe("same\n");
    expect((await readFile(join(base, "extracted", "big"))).equals(big)).toBe(true);
  });
  }

  it("fails an operation with EIO when its ask is not served or its answer does not decode", async () => {
    const at = join(base, "frames");
    await writeFile(join(provider, "f"), "x");
    const served = directoryHandlers(provider);
    await mount(at, "directory", askThrough(async (ask) => {
      const answer = await serveAsk(served, ask);
      if (ask[0] === 0) return new Uint8Array([0x07]); // a read answered with kind 7
      if (ask[0] === 5) throw new Error("not served"); // a mkdir never answered
      return answer;
    }));
    const result = await program(`
      const at = ${JSON.stringify(at)};
      const c = async (f) => { try { await f(); return "ok"; } catch (e) { return e.code; } };
      return { read: await c(() => fs.readFile(at + "/f")), mkdir: await c(() => fs.mkdir(at + "/d")), stat: (await fs.stat(at + "/f")).size };
    `);
    expect(result).toEqual({ read: "EIO", mkdir: "EIO", stat: 1 });
  });

  it("refuses writes with EROFS on a read-only mount, and reads", async () => {
    const at = join(base, "ro");
    await writeFile(join(provider, "f"), "readable");
    await mount(at, "directory", directoryHandlers(provider, { readonly: true }));
    const result = await program(`
      const at = ${JSON.stringify(at)};
      const codes = {};
      for (const [name, call] of Object.entries({
        write: () => fs.writeFile(at + "/f", "x"),
        create: () => fs.writeFile(at + "/new", "x"),
        mkdir: () => fs.mkdir(at + "/d"),
        unlink: () => fs.unlink(at + "/f"),
        rename: () => fs.rename(at + "/f", at + "/g"),
        truncate: () => fs.truncate(at + "/f", 1),
        chmod: () => fs.chmod(at + "/f", 0o600),
      })) { try { await call(); codes[name] = "ok"; } catch (e) { codes[name] = e.code; } }
      return { codes, read: await fs.readFile(at + "/f", "utf8") };
    `);
    expect(result.read).toBe("readable");
    expect(result.codes).toEqual({ write: "EROFS", create: "EROFS", mkdir: "EROFS", unlink: "EROFS", rename: "EROFS", truncate: "EROFS", chmod: "EROFS" });
    expect(await readFile(join(provider, "f"), "utf8")).toBe("readable");
  });

  it("maps answers to errno: an error or a failed ask is EIO, missing is ENOENT", async () => {
    const at = join(base, "failing");
    const real = directoryHandlers(provider);
    await writeFile(join(provider, "broken"), "x");
    await writeFile(join(provider, "refused"), "x");
    await mount(at, "directory", {
      ...real,
      read: async (path, offset, length) => (path === "broken" ? Promise.reject(new Error("the provider is gone")) : path === "refused" ? { kind: "error", message: "no" } : real.read(path, offset, length)),
    });
    const result = await program(`
      const at = ${JSON.stringify(at)};
      const c = async (f) => { try { await f(); return "ok"; } catch (e) { return e.code; } };
      return { broken: await c(() => fs.readFile(at + "/broken")), refused: await c(() => fs.readFile(at + "/refused")), missing: await c(() => fs.stat(at + "/nothing")) };
    `);
    expect(result).toEqual({ broken: "EIO", refused: "EIO", missing: "ENOENT" });
  });

  it("mounts one file: read, written and truncated in place; nothing held yet reads as empty", async () => {
    const at = join(base, "etc", "app.conf");
    let held: Buffer | undefined;
    await mount(at, "file", {
      ...directoryHandlers(provider),
      stat: async () => (held ? { kind: "stat", stat: { kind: "file", size: BigInt(held.length), mode: 0o644, uid: 0, gid: 0, atime: { secs: 0n, nanos: 0 }, mtime: { secs: 0n, nanos: 0 }, ctime: { secs: 0n, nanos: 0 } } } : { kind: "missing" }),
      read: async (path, offset, length) => {
        expect(path).toBe("");
        return held ? { kind: "data", bytes: held.subarray(Number(offset), Number(offset) + length) } : { kind: "missing" };
      },
      write: async (path, offset, bytes) => {
        expect(path).toBe("");
        const next = Buffer.alloc(Math.max(held?.length ?? 0, Number(offset) + bytes.length));
        held?.copy(next);
        next.set(bytes, Number(offset));
        held = next;
        return { kind: "ok" };
      },
      truncate: async (_path, size) => {
        const next = Buffer.alloc(Number(size));
        held?.copy(next, 0, 0, Number(size));
        held = next;
        return { kind: "ok" };
      },
    });
    const result = await program(`
      const at = ${JSON.stringify(at)};
      const before = await fs.readFile(at, "utf8");
      await fs.writeFile(at, "key = value\\n");
      const after = await fs.readFile(at, "utf8");
      await fs.truncate(at, 3);
      return { before, after, cut: await fs.readFile(at, "utf8"), isFile: (await fs.stat(at)).isFile() };
    `);
    expect(result).toEqual({ before: "", after: "key = value\n", cut: "key", isFile: true });
  });

  it("unmounts on close leaving no mount behind, answering an operation still waiting with EIO", async () => {
    const at = join(base, "closing");
    let entered!: () => void;
    const waiting = new Promise<void>((r) => (entered = r));
    const m = await mountFuse({
      path: at,
      kind: "directory",
      handlers: { ...directoryHandlers(provider), list: () => (entered(), new Promise(() => undefined)) },
    });
    expect(await isMountPoint(at)).toBe(true);
    const stuck = program(`try { await fs.readdir(${JSON.stringify(at)}); return "ok"; } catch (e) { return e.code; }`);
    await waiting;
    await m.close();
    expect(await stuck).toBe("EIO");
    expect(await isMountPoint(at)).toBe(false);
    expect(await readFile("/proc/self/mountinfo", "utf8")).not.toContain(at);
  });

  it("leaves a FUSE mount this process serves out of the tree: the walk never enters it (its listing failing or not)", async () => {
    const root = join(base, "tree");
    await mkdir(join(root, "ok"), { recursive: true });
    await writeFile(join(root, "ok", "f"), "x");
    // A directory whose listing fails (EIO), as a filesystem the proxy cannot read would.
    await mount(join(root, "broken"), "directory", { ...directoryHandlers(provider), list: async () => ({ kind: "error", message: "unreadable" }) });
    const frames = watchTree(root, { ignore: [] });
    const snapshot = (await frames.next()).value as { children: FiletreeNode[] };
    await frames.return!();
    const byName = Object.fromEntries(snapshot.children.map((n) => [n.name, n]));
    expect(byName.broken).toBeUndefined();
    expect(byName.ok).toMatchObject({ variant: "Directory", changes: true, children: [{ variant: "File", name: "f" }] });
  });

  it("leaves no mount behind when the process serving it exits without closing", async () => {
    const at = join(base, "exiting");
    const dist = new URL("../dist/families/fuse/index.js", import.meta.url).href;
    const child = await program(`
      const { mountFuse, directoryHandlers } = await import(${JSON.stringify(dist)});
      await mountFuse({ path: ${JSON.stringify(at)}, kind: "directory", handlers: directoryHandlers(${JSON.stringify(provider)}) });
      const mounted = (await fs.readFile("/proc/self/mountinfo", "utf8")).includes(${JSON.stringify(at)});
      process.stdout.write(JSON.stringify(mounted));
      process.exit(0);
    `);
    expect(child).toBe(true);
    expect(await isMountPoint(at)).toBe(false);
  });

  it("leaves no mount behind when the process serving it is killed (SIGKILL: no exit handler runs)", async () => {
    const at = join(base, "killed");
    const dist = new URL("../dist/families/fuse/index.js", import.meta.url).href;
    const { spawn } = await import("node:child_process");
    const child = spawn(process.execPath, ["--input-type=module", "-e", `
      const { mountFuse, directoryHandlers } = await import(${JSON.stringify(dist)});
      await mountFuse({ path: ${JSON.stringify(at)}, kind: "directory", handlers: directoryHandlers(${JSON.stringify(provider)}) });
      process.stdout.write("mounted\\n");
      setInterval(() => {}, 1000);
    `], { stdio: ["ignore", "pipe", "inherit"] });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    await new Promise((resolve) => child.stdout!.once("data", resolve));
    expect(await isMountPoint(at)).toBe(true);
    child.kill("SIGKILL");
    await exited;
    // fusermount, left beside the killed process, unmounts once it sees the FUSE descriptor close;
    // on a busy machine (CI runs every package at once) that has taken more than 5 s.
    for (const deadline = Date.now() + 60_000; (await isMountPoint(at)) && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 50));
    const stale = await isMountPoint(at);
    if (stale) await sh(`fusermount3 -u -z ${at} || umount -l ${at}`);
    expect(stale).toBe(false);
  }, 120_000);

  it("refuses a second mount at the same path", async () => {
    const at = join(base, "twice");
    await mount(at, "directory", directoryHandlers(provider));
    await expect(mountFuse({ path: at, kind: "directory", handlers: directoryHandlers(provider) })).rejects.toThrow(new MountError(`${at} is already a mount`));
  });
});
