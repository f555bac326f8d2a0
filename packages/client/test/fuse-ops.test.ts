// Every ordinary file operation a program makes inside a FUSE mount, through a real proxy, on both
// transports: the proxy (this process) mounts real kernel FUSE inside its root, this process's
// provider side serves it from a directory, and the program is a child process (node or coreutils).
// Multiplexed: nine offset-based asks, modes and times carried. Paths: whole-file asks (kinds 12–18),
// no setattr/truncate ask, so chmod/utimes succeed without reaching the provider.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fuseUnavailable, startProxy, type RunningProxy } from "@diverge/server";
import { PathsMounts, connectProxy, openContainer, type MultiplexedConnection, type PathsConnection } from "../src/index.js";

const unavailable = fuseUnavailable();
if (unavailable) console.log(`FUSE operation tests skipped: ${unavailable}`);

let base: string;
let root: string;
let provider: string;
let proxy: RunningProxy | undefined;
let container: MultiplexedConnection | undefined;
let answering: PathsConnection | undefined;

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fuse-ops-")));
  root = join(base, "container");
  provider = join(base, "provider");
  await mkdir(root);
  await mkdir(provider);
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root, log: () => {} });
});
afterEach(async () => {
  await container?.close();
  await answering?.close();
  await proxy?.close();
  container = answering = proxy = undefined;
  await rm(base, { recursive: true, force: true });
});

type Transport = "multiplexed" | "paths";

/** Mounts the provider's directory at `/<name>` on the transport; returns the mount point. */
async function mountProvider(transport: Transport, name: string, dir = provider): Promise<string> {
  const url = `ws://127.0.0.1:${proxy!.port}`;
  if (transport === "multiplexed") {
    container ??= await openContainer(url);
    await container.mount([name], dir);
  } else {
    const mounts = new PathsMounts(url);
    answering = connectProxy(url, { ...mounts.handlers() });
    await answering.whenConnected({ timeoutMs: 60_000 });
    await mounts.mount([name], dir);
  }
  return join(root, name);
}

/** Runs a script of `node:fs/promises` calls in a child process; returns what it prints as JSON. */
function program(script: string): Promise<any> {
  const source = `import * as fs from "node:fs/promises"; const out = await (async () => { ${script} })(); process.stdout.write(JSON.stringify(out ?? null));`;
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ["--input-type=module", "-e", source], { timeout: 60_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout)))),
  );
}

function sh(command: string): Promise<string> {
  return new Promise((resolve, reject) => execFile("sh", ["-c", command], { timeout: 120_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${command}: ${stderr || error.message}`)) : resolve(stdout))));
}

/** A directory as `{relative path: "dir 755" | "file 644 <sha256>"}` (modes optional). */
async function describeTree(dir: string, withModes: boolean): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (at: string, prefix: string) => {
    for (const name of (await readdir(at)).sort()) {
      const path = join(at, name);
      const s = await lstat(path);
      const mode = withModes ? ` ${(s.mode & 0o7777).toString(8)}` : "";
      if (s.isDirectory()) {
        out[prefix + name] = `dir${mode}`;
        await walk(path, `${prefix}${name}/`);
      } else out[prefix + name] = `file${mode} ${createHash("sha256").update(await readFile(path)).digest("hex")}`;
    }
  };
  await walk(dir, "");
  return out;
}

/** A source tree with nested directories, odd modes, an empty file and a file over several pieces. */
async function sourceTree(bigBytes: number): Promise<string> {
  const source = join(base, "source");
  await mkdir(join(source, "a", "b", "c"), { recursive: true });
  for (let i = 0; i < 12; i++) await writeFile(join(source, i % 3 === 0 ? "a" : i % 3 === 1 ? "a/b" : "a/b/c", `f${i}.txt`), `line ${i}\n`.repeat(i * 40));
  await writeFile(join(source, "empty"), "");
  const big = Buffer.alloc(bigBytes);
  for (let i = 0; i < big.length; i++) big[i] = (i * 31 + 7) & 0xff;
  await writeFile(join(source, "a", "big.bin"), big);
  await writeFile(join(source, "run.sh"), "#!/bin/sh\necho hi\n");
  await chmod(join(source, "run.sh"), 0o755);
  await writeFile(join(source, "a", "secret"), "s");
  await chmod(join(source, "a", "secret"), 0o600);
  await chmod(join(source, "a", "b"), 0o750);
  return source;
}

describe.skipIf(!!unavailable)("FUSE operations through the proxy's mount", () => {
  for (const transport of ["multiplexed", "paths"] as const) {
    const modes = transport === "multiplexed";

    it(`${transport}: readFile, writeFile, readdir, mkdir, rename, unlink, rmdir, truncate, chmod, utimes reach the provider's directory`, { timeout: 120_000 }, async () => {
      await writeFile(join(provider, "hello.txt"), "from the provider");
      await mkdir(join(provider, "old-dir"));
      const at = await mountProvider(transport, "m");
      const result = await program(`
        const at = ${JSON.stringify(at)};
        const c = async (f) => { try { await f(); return "ok"; } catch (e) { return e.code; } };
        const read = await fs.readFile(at + "/hello.txt", "utf8");
        await fs.writeFile(at + "/new.txt", "0123456789");
        await fs.mkdir(at + "/dir");
        await fs.mkdir(at + "/dir/sub");
        await fs.writeFile(at + "/dir/sub/inner", "inner");
        await fs.rename(at + "/dir/sub/inner", at + "/dir/moved");
        await fs.rename(at + "/old-dir", at + "/dir/renamed-dir");
        await fs.writeFile(at + "/cut", "abcdefghij");
        await fs.truncate(at + "/cut", 4);
        await fs.writeFile(at + "/grown", "ab");
        await fs.truncate(at + "/grown", 5);
        await fs.writeFile(at + "/gone", "x");
        await fs.unlink(at + "/gone");
        await fs.rmdir(at + "/dir/sub");
        const chmod = await c(() => fs.chmod(at + "/new.txt", 0o751));
        const utimes = await c(() => fs.utimes(at + "/new.txt", 1600000000, 1700000000));
        const s = await fs.stat(at + "/new.txt");
        return {
          read, chmod, utimes,
          root: (await fs.readdir(at)).sort(),
          dir: (await fs.readdir(at + "/dir", { withFileTypes: true })).map((e) => e.name + (e.isDirectory() ? "/" : "")).sort(),
          cut: await fs.readFile(at + "/cut", "utf8"),
          grown: [...await fs.readFile(at + "/grown")],
          mode: (s.mode & 0o777).toString(8),
          atime: s.atimeMs, mtime: s.mtimeMs,
          missing: await c(() => fs.readFile(at + "/gone")),
          notEmpty: await c(() => fs.rmdir(at + "/dir")),
        };
      `);
      expect(result).toMatchObject({
        read: "from the provider",
        chmod: "ok",
        utimes: "ok",
        root: ["cut", "dir", "grown", "hello.txt", "new.txt"],
        dir: ["moved", "renamed-dir/"],
        cut: "abcd",
        grown: [0x61, 0x62, 0, 0, 0],
        missing: "ENOENT",
        notEmpty: "ENOTEMPTY",
      });
      // Stat first: reading the provider's files below moves their access times.
      const onProvider = await stat(join(provider, "new.txt"));
      expect(await describeTree(provider, false)).toEqual(await describeTree(at, false));
      expect(await readFile(join(provider, "dir", "moved"), "utf8")).toBe("inner");
      expect(await readFile(join(provider, "new.txt"), "utf8")).toBe("0123456789");
      if (modes) {
        // Different access and modification times arrive as given (fuse-native's utimens passes the
        // access time twice; mount.ts reads the true one).
        expect(result).toMatchObject({ mode: "751", atime: 1600000000000, mtime: 1700000000000 });
        expect((onProvider.mode & 0o777).toString(8)).toBe("751");
        expect(onProvider.atimeMs).toBe(1600000000000);
        expect(onProvider.mtimeMs).toBe(1700000000000);
      } else {
        // No setattr on the paths transport: accepted, the provider's file unchanged, the proxy's own mode.
        expect(result.mode).toBe("644");
        expect((onProvider.mode & 0o777).toString(8)).toBe("644");
        expect(onProvider.mtimeMs).not.toBe(1700000000000);
      }
    });

    if (modes) {
      it(`${transport}: touch sets both times to now, touch -d both to the time given`, { timeout: 120_000 }, async () => {
        await writeFile(join(provider, "t"), "x");
        const { utimes } = await import("node:fs/promises");
        await utimes(join(provider, "t"), 1500000000, 1500000000);
        const at = await mountProvider(transport, "m");
        const before = Date.now() - 5000;
        await sh(`touch ${at}/t`);
        const touched = await stat(join(provider, "t"));
        expect(touched.atimeMs).toBeGreaterThan(before);
        expect(touched.mtimeMs).toBeGreaterThan(before);
        await sh(`touch -d @1400000000 ${at}/t`);
        const given = await stat(join(provider, "t"));
        expect(given.mtimeMs).toBe(1400000000000);
        expect(given.atimeMs).toBe(1400000000000);
      });
    }

    it(`${transport}: cp -r and tar of a tree into and out of the mount keep every byte${modes ? " and mode" : ""}`, { timeout: 120_000 }, async () => {
      // Paths asks carry whole files, so each 128 KiB write the kernel makes moves the whole file
      // twice: a smaller big file there keeps the test short.
      const source = await sourceTree(modes ? 5 * 1024 * 1024 + 17 : 1024 * 1024 + 17);
      const expected = await describeTree(source, modes);
      const at = await mountProvider(transport, "m");
      // In with cp -r: the provider's directory is the source.
      await sh(`cp -r ${source}/. ${at}/`);
      expect(await describeTree(provider, modes)).toEqual(expected);
      // Out with cp -r.
      await sh(`cp -r ${at}/. ${base}/copied-out`);
      expect(await describeTree(join(base, "copied-out"), modes)).toEqual(expected);
      // Out with tar -c from inside the mount, extracted outside.
      await sh(`tar -C ${at} -cf ${base}/out.tar . && mkdir ${base}/untarred && tar -C ${base}/untarred -xf ${base}/out.tar`);
      expect(await describeTree(join(base, "untarred"), modes)).toEqual(expected);
      // In with tar -x into the mount (a fresh subdirectory), read back on the provider's side.
      await sh(`tar -C ${source} -cf ${base}/in.tar . && mkdir ${at}/from-tar && tar -C ${at}/from-tar -xf ${base}/in.tar`);
      expect(await describeTree(join(provider, "from-tar"), modes)).toEqual(expected);
    });
  }
});

describe.skipIf(!!unavailable)("the diverge-proxy process ending with mounts", () => {
  it("SIGTERM unmounts every mount of both transports, an operation still waiting failing, and leaves no stale mount", { timeout: 120_000 }, async () => {
    const { spawn } = await import("node:child_process");
    const { fileURLToPath } = await import("node:url");
    const proxyCli = fileURLToPath(new URL("../../server/dist/cli.js", import.meta.url));
    const child = spawn(process.execPath, [proxyCli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--root", root, "--quiet"], { stdio: ["ignore", "pipe", "pipe"] });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    let stdout = "";
    const line = await new Promise<string>((resolve) =>
      child.stdout!.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes("\n")) resolve(stdout);
      }),
    );
    try {
      const url = `ws://127.0.0.1:${Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)![1])}`;
      await writeFile(join(provider, "f"), "data");
      container = await openContainer(url);
      const { directoryHandlers } = await import("../src/index.js");
      // A listing the provider never answers: the program waits on it when the proxy is stopped.
      let listAsked = false;
      await container.mount(["multiplexed"], { ...directoryHandlers(provider), list: () => ((listAsked = true), new Promise(() => undefined)) });
      const mounts = new PathsMounts(url);
      answering = connectProxy(url, { ...mounts.handlers() });
      await answering.whenConnected({ timeoutMs: 60_000 });
      await mounts.mount(["paths"], provider);
      expect(await program(`return [await fs.readFile(${JSON.stringify(join(root, "multiplexed", "f"))}, "utf8"), await fs.readFile(${JSON.stringify(join(root, "paths", "f"))}, "utf8")]`)).toEqual(["data", "data"]);
      const waiting = program(`try { await fs.readdir(${JSON.stringify(join(root, "multiplexed"))}); return "ok"; } catch (e) { return e.code; }`);
      // SIGTERM once the listing is asked (the program waits on it), not before.
      for (const deadline = Date.now() + 60_000; !listAsked && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(listAsked).toBe(true);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(["EIO", "ENOTCONN"]).toContain(await waiting);
      const info = await readFile("/proc/self/mountinfo", "utf8");
      expect(info).not.toContain(join(root, "multiplexed"));
      expect(info).not.toContain(join(root, "paths"));
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});

describe.skipIf(!!unavailable)("mounts and the §2 rules, on both transports", () => {
  it("paths: /fuse/mount refuses a bad path, an existing mount and a link out of the root, as fuse::mount does", { timeout: 120_000 }, async () => {
    const url = `ws://127.0.0.1:${proxy!.port}`;
    const mounts = new PathsMounts(url);
    answering = connectProxy(url, { ...mounts.handlers() });
    await answering.whenConnected({ timeoutMs: 60_000 });
    await mkdir(join(base, "elsewhere"));
    const { symlink } = await import("node:fs/promises");
    await symlink(join(base, "elsewhere"), join(root, "out"));
    const refusal = (path: string[]) => mounts.mount(path, provider).then(() => "mounted", (error: { detail: unknown }) => error.detail);
    const notAName = { variant: "Failed", what: "/fuse/mount", error: "the path names the root, or has a component that is not a name" };
    for (const path of [[], ["a", ".."], ["."], [""], ["a/b"], ["a\u0000"]]) expect(await refusal(path), JSON.stringify(path)).toEqual(notAName);
    expect(await refusal(["out", "x"])).toEqual({ variant: "Failed", what: "/fuse/mount", error: "mount: the path leads outside the root" });
    expect(await refusal(["m"])).toBe("mounted");
    expect(await refusal(["m"])).toEqual({ variant: "Failed", what: "/fuse/mount", error: "/m is already a mount" });
    expect(await readdir(join(base, "elsewhere"))).toEqual([]);
  });

  for (const transport of ["multiplexed", "paths"] as const) {
    it(`${transport}: the provider's connection lost while an operation waits on it fails that operation (EIO), never hangs`, { timeout: 120_000 }, async () => {
      const { directoryHandlers } = await import("../src/index.js");
      await writeFile(join(provider, "f"), "data");
      let asked!: () => void;
      const waiting = new Promise<void>((resolve) => (asked = resolve));
      const handlers = { ...directoryHandlers(provider), list: () => (asked(), new Promise<never>(() => undefined)) };
      const url = `ws://127.0.0.1:${proxy!.port}`;
      if (transport === "multiplexed") {
        container = await openContainer(url);
        await container.mount(["m"], handlers);
      } else {
        const mounts = new PathsMounts(url);
        answering = connectProxy(url, { ...mounts.handlers() });
        await answering.whenConnected({ timeoutMs: 60_000 });
        await mounts.mount(["m"], handlers);
      }
      const at = join(root, "m");
      const result = program(`try { await fs.readdir(${JSON.stringify(at)}); return "ok"; } catch (e) { return e.code; }`);
      await waiting;
      // Abruptly: the operation's ask is in flight and never answered.
      if (transport === "multiplexed") await container!.close();
      else await answering!.close();
      expect(["EIO", "ENOTCONN"]).toContain(await result);
    });
  }
});
