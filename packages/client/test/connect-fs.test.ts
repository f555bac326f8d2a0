// `diverge connect --mount` and `--watch-tree` as a consumer meets them, on both transports: a real
// proxy (in this process) mounts real kernel FUSE inside its root for the command (a child process),
// which serves every operation from a directory of its own; a program (another child) uses ordinary
// file calls inside the mount; the tree's frames come out on the command's stdout as JSON lines.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { fuseUnavailable, startProxy, type RunningProxy } from "@diverge/server";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const run = promisify(execFile);
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

const unavailable = fuseUnavailable();
if (unavailable) console.log(`diverge connect --mount tests skipped: ${unavailable}`);

interface Fixture {
  base: string;
  root: string;
  proxy: RunningProxy;
}

async function fixture(): Promise<Fixture> {
  const base = await realpath(await mkdtemp(join(tmpdir(), "diverge-connect-fs-")));
  cleanups.push(() => rm(base, { recursive: true, force: true }));
  const root = join(base, "container");
  await mkdir(root);
  await copyFile(join(exampleRoot, "DIVERGE.md"), join(root, "DIVERGE.md"));
  let pgPort = 0;
  const app = await startExampleContainer({ pgPort: () => pgPort, database: { user: "postgres", database: "postgres" } });
  cleanups.push(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root, log: () => {}, secretsGate: false });
  pgPort = proxy.multiplexed.pgPort;
  cleanups.push(() => proxy.close());
  return { base, root, proxy };
}

interface Running {
  child: ChildProcess;
  exited: Promise<number | null>;
  stderr: () => string;
  /** The JSON lines printed on stdout so far. */
  frames: () => any[];
  waitFor(text: string | RegExp, ms?: number): Promise<void>;
  waitForFrame(match: (frame: any) => boolean, ms?: number): Promise<any>;
}

function connect(args: string[]): Running {
  const child = spawn(process.execPath, [cli, "connect", ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, API_KEY: "k" } });
  let stderr = "";
  let stdout = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  });
  const frames = () =>
    stdout
      .split("\n")
      .slice(0, -1)
      .map((line) => JSON.parse(line));
  const until = async <T>(what: string, find: () => T | undefined, ms: number): Promise<T> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = find();
      if (found !== undefined) return found;
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`never saw ${what}; exit ${child.exitCode}; stderr:\n${stderr}\nstdout:\n${stdout}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };
  return {
    child,
    exited,
    stderr: () => stderr,
    frames,
    waitFor: async (text, ms = 30_000) => {
      await until(String(text), () => ((typeof text === "string" ? stderr.includes(text) : text.test(stderr)) ? true : undefined), ms);
    },
    waitForFrame: (match, ms = 30_000) => until("the frame", () => frames().find(match), ms),
  };
}

/** Runs a script of `node:fs/promises` calls in a child process (the container's program); returns what it prints as JSON. */
function program(script: string): Promise<any> {
  const source = `import * as fs from "node:fs/promises"; const out = await (async () => { ${script} })(); process.stdout.write(JSON.stringify(out ?? null));`;
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ["--input-type=module", "-e", source], { timeout: 60_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout)))),
  );
}
const code = (call: string) => `await (async () => { try { await ${call}; return "ok"; } catch (e) { return e.code; } })()`;
const mounted = async (path: string) => (await readFile("/proc/self/mountinfo", "utf8")).split("\n").some((line) => line.split(" ")[4] === path);

const transports = [
  ["multiplexed", (proxy: RunningProxy) => ["--proxy", `ws://127.0.0.1:${proxy.port}`, "--arguments", '{"greeting":"Hey"}', "--secret-env", "API_KEY"]],
  ["paths", (proxy: RunningProxy) => ["--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", "paths"]],
] as const;

describe.skipIf(!!unavailable)("diverge connect --mount and --watch-tree", () => {
  for (const [transport, flags] of transports) {
    it(`${transport}: the program's files inside the mounts are the provider's; :ro is EROFS; the tree is a Snapshot then deltas on stdout`, { timeout: 120_000 }, async () => {
      const { base, root, proxy } = await fixture();
      const provider = join(base, "provider");
      const shared = join(base, "shared");
      await mkdir(provider);
      await mkdir(shared);
      await writeFile(join(provider, "hello.txt"), "from the provider");
      await writeFile(join(shared, "a.txt"), "alpha");
      await mkdir(join(root, "skip"));
      await writeFile(join(root, "kept.txt"), "kept");
      const running = connect([...flags(proxy), "--mount", `/work=${provider}`, "--mount", `data/shared=${shared}:ro`, "--watch-tree", "--ignore", "/skip"]);
      await running.waitFor("mounted /data/shared from");
      const snapshot = await running.waitForFrame(() => true);
      expect(snapshot.variant).toBe("Snapshot");
      const names = snapshot.children.map((node: { name: string }) => node.name).sort();
      // --ignore'd paths and the command's own mounts are left out; the mount's parent is there.
      expect(names).toEqual(["DIVERGE.md", "data", "kept.txt"]);
      expect(snapshot.children.find((node: { name: string }) => node.name === "data").children).toEqual([]);

      const result = await program(`
        const work = ${JSON.stringify(join(root, "work"))};
        const shared = ${JSON.stringify(join(root, "data", "shared"))};
        const read = await fs.readFile(work + "/hello.txt", "utf8");
        await fs.writeFile(work + "/made.txt", "from the program");
        return {
          read,
          listing: (await fs.readdir(work)).sort(),
          shared: await fs.readFile(shared + "/a.txt", "utf8"),
          write: ${code('fs.writeFile(shared + "/b.txt", "x")')},
          change: ${code('fs.writeFile(shared + "/a.txt", "x")')},
          unlink: ${code('fs.unlink(shared + "/a.txt")')},
        };
      `);
      expect(result).toEqual({ read: "from the provider", listing: ["hello.txt", "made.txt"], shared: "alpha", write: "EROFS", change: "EROFS", unlink: "EROFS" });
      expect(await readFile(join(provider, "made.txt"), "utf8")).toBe("from the program");
      expect(await readdir(shared)).toEqual(["a.txt"]);
      expect(await readFile(join(shared, "a.txt"), "utf8")).toBe("alpha");

      // A change under an ignored path says nothing; one elsewhere is one delta.
      await writeFile(join(root, "skip", "quiet.txt"), "x");
      await writeFile(join(root, "added.txt"), "new");
      const inserted = await running.waitForFrame((frame) => frame.variant !== "Snapshot" && frame.path?.[0] === "added.txt");
      expect(inserted).toMatchObject({ variant: expect.stringMatching(/^(Inserted|Modified)$/), path: ["added.txt"], node: { variant: "File", name: "added.txt" } });
      expect(running.frames().some((frame) => JSON.stringify(frame).includes("quiet.txt"))).toBe(false);
      // Nothing the program did inside the mounts is in the tree.
      expect(running.frames().some((frame) => JSON.stringify(frame).includes("made.txt"))).toBe(false);

      running.child.kill("SIGTERM");
      expect(await running.exited).toBe(0);
      if (transport === "multiplexed") {
        // The connection ended: the proxy unmounted both.
        for (const deadline = Date.now() + 60_000; (await mounted(join(root, "work"))) && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 50));
        expect(await mounted(join(root, "work"))).toBe(false);
      } else {
        // A paths mount lives as long as the proxy (its asks wait on the board for the next provider
        // on /requests); the proxy's end unmounts it.
        expect(await mounted(join(root, "work"))).toBe(true);
        await proxy.close();
        expect(await mounted(join(root, "work"))).toBe(false);
      }
      expect(await mounted(join(root, "data", "shared"))).toBe(false);
    });
  }

  it("--watch-tree <root>: only that subtree, paths from it, a fresh Snapshot when it goes", { timeout: 120_000 }, async () => {
    const { root, proxy } = await fixture();
    await mkdir(join(root, "src", "lib"), { recursive: true });
    await writeFile(join(root, "src", "a.ts"), "a");
    await writeFile(join(root, "outside.txt"), "o");
    const running = connect(["--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", "paths", "--watch-tree", "/src", "--quiet"]);
    const snapshot = await running.waitForFrame(() => true);
    expect(snapshot.variant).toBe("Snapshot");
    expect(snapshot.children.map((node: { name: string }) => node.name).sort()).toEqual(["a.ts", "lib"]);
    await writeFile(join(root, "elsewhere.txt"), "x");
    await writeFile(join(root, "src", "lib", "b.ts"), "bb");
    expect(await running.waitForFrame((frame) => frame.path?.join("/") === "lib/b.ts")).toMatchObject({ node: { variant: "File", name: "b.ts" } });
    await rm(join(root, "src"), { recursive: true });
    await running.waitForFrame((frame) => frame.variant === "Snapshot" && frame.children.length === 0);
    expect(running.frames().some((frame) => JSON.stringify(frame).includes("elsewhere"))).toBe(false);
    running.child.kill("SIGTERM");
    expect(await running.exited).toBe(0);
  });

  it("refuses bad --mount values and a stray --ignore with exit 2; a mount the proxy refuses ends the command with exit 7", { timeout: 120_000 }, async () => {
    const { base, root, proxy } = await fixture();
    const url = `ws://127.0.0.1:${proxy.port}`;
    const usage = async (args: string[]) => {
      const failed = await run(process.execPath, [cli, "connect", "--proxy", url, ...args]).then(
        () => ({ code: 0, stderr: "" }),
        (error: { code: number; stderr: string }) => error,
      );
      return { code: failed.code, line: failed.stderr.split("\n")[0] };
    };
    const { stdout: help } = await run(process.execPath, [cli, "connect", "--help"]);
    for (const flag of ["--mount <container-path>=<provider-dir>[:ro]", "--watch-tree", "--ignore <path>"]) expect(help).toContain(flag);
    expect(await usage(["--mount", "/work"])).toEqual({ code: 2, line: "--mount /work: expected <container-path>=<provider-dir>[:ro]" });
    expect(await usage(["--mount", `/=${base}`])).toEqual({ code: 2, line: `--mount /=${base}: the container path names the root` });
    expect(await usage(["--mount", `/w=${join(base, "none")}:ro`])).toEqual({ code: 2, line: `--mount /w=${join(base, "none")}:ro: ${join(base, "none")} does not exist` });
    expect(await usage(["--mount", `/w=${base}`, "--mount", `w=${base}`])).toEqual({ code: 2, line: `--mount w=${base}: /w is mounted twice` });
    expect(await usage(["--ignore", "/x"])).toEqual({ code: 2, line: "--ignore belongs to --watch-tree" });
    // The proxy refuses a mount point that leads out of its root: one line, exit 7, no mount anywhere.
    const { symlink } = await import("node:fs/promises");
    await mkdir(join(base, "elsewhere"));
    await symlink(join(base, "elsewhere"), join(root, "out"));
    for (const [, flags] of transports) {
      const refused = connect([...flags(proxy), "--mount", `/out/x=${base}`]);
      expect(await refused.exited).toBe(7);
      expect(refused.stderr()).toMatch(/mount: the path leads outside the root\n$/);
    }
    expect(await readdir(join(base, "elsewhere"))).toEqual([]);
  });
});
