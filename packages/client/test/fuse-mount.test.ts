// fuse::mount end to end: a real proxy mounts real kernel FUSE inside its root, and this provider
// answers every operation from a directory of its own. Operations inside the mount run in a child
// process, as the container's program would (this process serves the mount).
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fuseUnavailable, isMountPoint, startProxy, type RunningProxy } from "@diverge/server";
import { FilesystemError, PathsMounts, connectProxy, directoryHandlers, openContainer, type FuseHandlers, type MultiplexedConnection, type PathsConnection } from "../src/index.js";

const unavailable = fuseUnavailable();
if (unavailable) console.log(`FUSE mount tests skipped: ${unavailable}`);

let base: string;
let root: string;
let provider: string;
let proxy: RunningProxy | undefined;
let container: MultiplexedConnection | undefined;

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-mount-")));
  root = join(base, "container");
  provider = join(base, "provider");
  await mkdir(root);
  await mkdir(provider);
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root, log: () => {} });
  container = await openContainer(`ws://127.0.0.1:${proxy.port}`);
});
afterEach(async () => {
  await container?.close();
  await proxy?.close();
  container = proxy = undefined;
  await rm(base, { recursive: true, force: true });
});

/** Runs a script of `node:fs/promises` calls in a child process; returns what it prints as JSON. */
function program(script: string): Promise<any> {
  const source = `import * as fs from "node:fs/promises"; const out = await (async () => { ${script} })(); process.stdout.write(JSON.stringify(out ?? null));`;
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ["--input-type=module", "-e", source], { timeout: 60_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout)))),
  );
}
const code = (call: string) => `try { await ${call}; return "ok"; } catch (e) { return e.code; }`;

const mountInfo = async (path: string) => (await readFile("/proc/self/mountinfo", "utf8")).split("\n").some((line) => line.split(" ")[4] === path);

describe.skipIf(!!unavailable)("fuse::mount over the multiplexed connection", () => {
  it("the program's file operations inside the mount reach the provider's directory", async () => {
    await writeFile(join(provider, "hello.txt"), "from the provider");
    const mount = await container!.mount(["workspace"], provider, { kind: "directory" });
    const at = join(root, "workspace");
    expect(await isMountPoint(at)).toBe(true);
    const result = await program(`
      const at = ${JSON.stringify(at)};
      const read = await fs.readFile(at + "/hello.txt", "utf8");
      await fs.writeFile(at + "/new.txt", "from the program");
      await fs.mkdir(at + "/dir");
      await fs.writeFile(at + "/dir/inner", "x".repeat(3 * 1024 * 1024));
      await fs.rename(at + "/dir/inner", at + "/dir/moved");
      await fs.truncate(at + "/dir/moved", 10);
      const listing = (await fs.readdir(at)).sort();
      await fs.writeFile(at + "/gone", "");
      await fs.unlink(at + "/gone");
      return { read, listing, size: (await fs.stat(at + "/dir/moved")).size, missing: await (async () => { ${code("fs.readFile(at + '/nope')")} })() };
    `);
    expect(result).toEqual({ read: "from the provider", listing: ["dir", "hello.txt", "new.txt"], size: 10, missing: "ENOENT" });
    expect(await readFile(join(provider, "new.txt"), "utf8")).toBe("from the program");
    expect(await readFile(join(provider, "dir", "moved"), "utf8")).toBe("x".repeat(10));
    expect((await readdir(provider)).sort()).toEqual(["dir", "hello.txt", "new.txt"]);
    expect(mount.asks).toBeGreaterThan(5);
  });

  it("read-only: changes fail with EROFS, reads work; a file mount serves one file", async () => {
    await writeFile(join(provider, "a"), "alpha");
    await container!.mount(["ro"], provider, { readonly: true });
    const handlers = directoryHandlers(provider);
    const single: FuseHandlers = { ...handlers, read: (_p, o, l) => handlers.read("a", o, l), stat: () => handlers.stat("a"), write: (_p, o, b) => handlers.write("a", o, b), truncate: (_p, s) => handlers.truncate("a", s) };
    await container!.mount(["etc", "app.conf"], single, { kind: "file" });
    const result = await program(`
      const ro = ${JSON.stringify(join(root, "ro"))};
      const file = ${JSON.stringify(join(root, "etc", "app.conf"))};
      return {
        read: await fs.readFile(ro + "/a", "utf8"),
        write: await (async () => { ${code('fs.writeFile(ro + "/b", "x")')} })(),
        mkdir: await (async () => { ${code('fs.mkdir(ro + "/d")')} })(),
        unlink: await (async () => { ${code('fs.unlink(ro + "/a")')} })(),
        file: await fs.readFile(file, "utf8"),
      };
    `);
    expect(result).toEqual({ read: "alpha", write: "EROFS", mkdir: "EROFS", unlink: "EROFS", file: "alpha" });
    expect(await readdir(provider)).toEqual(["a"]);
  });

  it("refusals: a bad path, an existing mount, a link out of the root; a request without members is not served", async () => {
    await mkdir(join(base, "elsewhere"));
    const { symlink } = await import("node:fs/promises");
    await symlink(join(base, "elsewhere"), join(root, "out"));
    const reason = async (promise: Promise<unknown>) => {
      try {
        await promise;
      } catch (error) {
        expect(error).toBeInstanceOf(FilesystemError);
        return (error as FilesystemError).detail;
      }
      throw new Error("mounted");
    };
    expect(await reason(container!.mount([], provider))).toEqual({ variant: "Failed", what: "fuse::mount", error: "the path names the root, or has a component that is not a name" });
    expect(await reason(container!.mount(["a", ".."], provider))).toMatchObject({ variant: "Failed" });
    expect(await reason(container!.mount(["out", "x"], provider))).toEqual({ variant: "Failed", what: "fuse::mount", error: "mount: the path leads outside the root" });
    await container!.mount(["m"], provider);
    expect(await reason(container!.mount(["m"], provider))).toEqual({ variant: "Failed", what: "fuse::mount", error: "/m is already a mount" });
    expect(await readdir(join(base, "elsewhere"))).toEqual([]);
  });

  it("a provider that stops answering makes operations fail with EIO; the connection ending leaves no stale mount", async () => {
    const mount = await container!.mount(["w"], provider);
    await writeFile(join(provider, "f"), "data");
    const at = join(root, "w");
    expect(await program(`return await fs.readFile(${JSON.stringify(at + "/f")}, "utf8")`)).toBe("data");
    mount.stop();
    expect(await program(`${code(`fs.readFile(${JSON.stringify(at + "/f")})`)}`)).toBe("EIO");
    expect(await mountInfo(at)).toBe(true);
    await container!.close();
    for (const deadline = Date.now() + 60_000; (await mountInfo(at)) && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await mountInfo(at)).toBe(false);
  });
});

describe.skipIf(!!unavailable)("/fuse/mount and kinds 12-18 over the paths transport (whole files)", () => {
  let answering: PathsConnection | undefined;
  afterEach(async () => {
    await answering?.close();
    answering = undefined;
  });
  async function mounts(): Promise<PathsMounts> {
    const url = `ws://127.0.0.1:${proxy!.port}`;
    const made = new PathsMounts(url);
    answering = connectProxy(url, { ...made.handlers() });
    await answering.whenConnected({ timeoutMs: 60_000 });
    return made;
  }

  it("the program's file operations reach the provider's directory through whole-file asks", async () => {
    const made = await mounts();
    await writeFile(join(provider, "hello.txt"), "from the provider");
    await made.mount(["workspace"], provider);
    const at = join(root, "workspace");
    const result = await program(`
      const at = ${JSON.stringify(at)};
      const read = await fs.readFile(at + "/hello.txt", "utf8");
      await fs.writeFile(at + "/new.txt", "from the program");
      await fs.mkdir(at + "/dir");
      await fs.writeFile(at + "/dir/inner", "y".repeat(300000));
      await fs.rename(at + "/dir/inner", at + "/dir/moved");
      await fs.truncate(at + "/dir/moved", 10);
      await fs.appendFile(at + "/new.txt", "!");
      const listing = (await fs.readdir(at)).sort();
      await fs.writeFile(at + "/gone", "");
      await fs.unlink(at + "/gone");
      return { read, listing, size: (await fs.stat(at + "/dir/moved")).size, missing: await (async () => { ${code("fs.readFile(at + '/nope')")} })() };
    `);
    expect(result).toEqual({ read: "from the provider", listing: ["dir", "hello.txt", "new.txt"], size: 10, missing: "ENOENT" });
    expect(await readFile(join(provider, "new.txt"), "utf8")).toBe("from the program!");
    expect(await readFile(join(provider, "dir", "moved"), "utf8")).toBe("y".repeat(10));
  });

  it("read-only refuses changes with EROFS; a forgotten mount fails with EIO; the proxy's end leaves no stale mount", async () => {
    const made = await mounts();
    await writeFile(join(provider, "a"), "alpha");
    await made.mount(["ro"], provider, { readonly: true });
    const id = await made.mount(["rw"], provider);
    const result = await program(`
      const ro = ${JSON.stringify(join(root, "ro"))};
      return { read: await fs.readFile(ro + "/a", "utf8"), write: await (async () => { ${code('fs.writeFile(ro + "/b", "x")')} })(), unlink: await (async () => { ${code('fs.unlink(ro + "/a")')} })() };
    `);
    expect(result).toEqual({ read: "alpha", write: "EROFS", unlink: "EROFS" });
    made.forget(id);
    expect(await program(code(`fs.readFile(${JSON.stringify(join(root, "rw", "a"))})`))).toBe("EIO");
    expect(await mountInfo(join(root, "rw"))).toBe(true);
    await proxy!.close();
    expect(await mountInfo(join(root, "rw"))).toBe(false);
    expect(await mountInfo(join(root, "ro"))).toBe(false);
    expect(await readdir(provider)).toEqual(["a"]);
  });
});
