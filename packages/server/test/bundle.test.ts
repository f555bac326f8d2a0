// The proxy as one file to ship: `scripts/bundle.mjs` (what `pnpm --filter @diverge/server bundle`
// runs) builds the bundle and, where this machine can, the single executable, with the native
// packages beside them in node_modules/; each is copied alone into an empty temporary directory (no
// node_modules anywhere above it) and run from there, and again with its node_modules/ beside it,
// started from another directory, for a tree and a real kernel FUSE mount.
// A provider — the built @diverge/client of the workspace — begins tools on the multiplexed
// connection and calls the container's tool through it, and answers the program's outward ask on
// the paths transport; the example container program is the container. All of it starts straight
// after the listening line, while the proxy is still loading what serves it.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
// The provider: the built client package (it depends on this package for its own tests, so it is
// loaded from its dist rather than declared; turbo builds it before this package's tests).
const clientEntry = join(packageDir, "..", "client", "dist", "index.js");

interface ContainerConnection {
  tree(): AsyncIterable<{ children?: { name: string }[] }> & { stop(): void };
  read(path: readonly string[]): AsyncIterable<Uint8Array>;
  mount(path: readonly string[], target: string, options?: { kind?: "file" | "directory" }): Promise<unknown>;
  beginTools(args: unknown): Promise<unknown>;
  feedSecrets(secrets: Record<string, string>): Promise<void>;
  info(): Promise<{ frontMatter: Record<string, unknown> } | undefined>;
  mcp: { callTool(params: unknown): Promise<{ content: { type: string; text?: string }[] }> };
  close(): void;
}
interface DivergeClient {
  openContainer(url: string, options?: { handlers?: Record<string, unknown> }): Promise<ContainerConnection>;
  connectProxy(url: string, handlers: Record<string, unknown>): { whenConnected(): Promise<void>; close(): Promise<void> };
}

const work = mkdtempSync(join(tmpdir(), "diverge-bundle-"));
const built = join(work, "build");
/** The SEA is required wherever Node and postject can make one (Node 20.12+ on Linux, macOS, Windows). */
const [major, minor] = process.versions.node.split(".").map(Number) as [number, number];
const seaExpected = ["linux", "darwin", "win32"].includes(process.platform) && (major > 20 || (major === 20 && minor >= 12));
const seaName = process.platform === "win32" ? "diverge-proxy.exe" : "diverge-proxy";
let bundleOutput = "";
const children: ChildProcess[] = [];

beforeAll(() => {
  const result = spawnSync(process.execPath, [join(packageDir, "scripts", "bundle.mjs"), "--out", built, ...(seaExpected ? ["--require-sea"] : ["--no-sea"])], {
    encoding: "utf8",
    // Hang guards: esbuild, the SEA blob and postject take minutes beside a CPU-bound neighbour.
    timeout: 600_000,
  });
  bundleOutput = `${result.stdout}${result.stderr}`;
  if (result.status !== 0) throw new Error(`bundle.mjs failed (${result.status ?? result.signal}): ${bundleOutput}`);
}, 900_000);

afterAll(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
  // Every proxy has exited by now (each test awaits its exit), so nothing still writes in them.
  for (const dir of madeDirs) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
});

/** The temporary directories the tests made, removed once every proxy has stopped. */
const madeDirs: string[] = [];
function made(dir: string): string {
  madeDirs.push(dir);
  return dir;
}

/** A fresh empty directory holding only `file` (and, with `natives`, the node_modules/ the bundle script wrote beside it). */
function alone(file: string, natives = false): string {
  const dir = made(mkdtempSync(join(tmpdir(), "diverge-alone-")));
  copyFileSync(join(built, file), join(dir, file));
  if (natives) cpSync(join(built, "node_modules"), join(dir, "node_modules"), { recursive: true });
  return dir;
}

function startProxy(command: string, args: string[], cwd: string) {
  // No NODE_PATH, NODE_OPTIONS or anything else of the workspace's environment.
  const child = spawn(command, args, { cwd, env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const line = new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes("\n")) resolve(stdout.split("\n")[0]!);
    });
    child.once("exit", (code) => reject(new Error(`the proxy exited with ${code} before listening: ${stderr}`)));
  });
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, line, exit, stderr: () => stderr };
}

async function endToEnd(command: string, args: string[], cwd: string): Promise<void> {
  const client = (await import(pathToFileURL(clientEntry).href)) as DivergeClient;
  const container = await startExampleContainer({ host: "127.0.0.1" });
  const proxy = startProxy(command, [...args, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", String(container.port), "--root", exampleRoot, "--quiet"], cwd);
  let connection: ContainerConnection | undefined;
  let provider: { close(): Promise<void> } | undefined;
  const program = new Client({ name: "program-in-the-container", version: "1.0.0" });
  try {
    const line = await proxy.line;
    const port = Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)![1]);
    const programPort = Number(/http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(line)![1]);
    // All at once, straight after the listening line: the program's outward ask (held by the
    // secrets gate), the provider holding /requests to answer it, and the multiplexed connection.
    provider = client.connectProxy(`ws://127.0.0.1:${port}`, {
      callTool: (params: { name: string }) => ({ variant: "Result", result: { content: [{ type: "text", text: `the provider answered ${params.name}` }] } }),
    });
    const outward = program
      .connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${programPort}/mcp`)))
      .then(() => program.callTool({ name: "outward-tool", arguments: {} }));
    outward.catch(() => {}); // awaited below; a failure before then is reported by the first failing step
    // The outward ask waits for the secrets, fed after the begin: by then the begin scope carries it
    // (the project's transport rule), answered by the same handler in the generated shape.
    connection = await client.openContainer(`ws://127.0.0.1:${port}/`, {
      handlers: {
        mcpCallTool: ({ params }: { params: { name: string } }) => ({ variant: "Result", result: { content: [{ type: "text", text: `the provider answered ${params.name}` }] } }),
      },
    });
    const tools = (await connection.beginTools({ arguments: { greeting: "Hello" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } })) as unknown[];
    expect(tools.length).toBeGreaterThan(0);
    expect((await connection.info())?.frontMatter).toBeTypeOf("object");
    await connection.feedSecrets({ API_KEY: "bundle-key" });
    const greeted = await connection.mcp.callTool({ name: "greet", arguments: { name: "Ada" } });
    expect(greeted.content[0]).toEqual({ type: "text", text: "Hello, Ada!" });
    expect(((await outward) as { content: { text: string }[] }).content[0]!.text).toBe("the provider answered outward-tool");
  } finally {
    await program.close().catch(() => {});
    await provider?.close();
    connection?.close();
    proxy.child.kill("SIGTERM");
    await container.close();
  }
  expect(await proxy.exit).toBe(0);
  // --quiet: nothing but errors, so neither a failure nor Node's embedded-require() warning (which
  // the single executable printed when ws looked for its optional helper).
  expect(proxy.stderr()).toBe("");
}

// Each test below starts a proxy from its one file: 15 s to the listening line and 60 s in all seen
// beside a CPU-bound neighbour (load average 20 on two cores), so their bound is 300 s, a hang guard.
const fuseMissing = existsSync("/dev/fuse") ? undefined : "this machine has no /dev/fuse";

/**
 * A provider asks for the container's tree and mounts a directory of its own
 * in the container (the FUSE binding, native): the proxy is started from `cwd`, which is not where
 * its file and node_modules/ are, so they are found by the file's own location.
 */
async function treeAndMount(command: string, args: string[], cwd: string): Promise<void> {
  const client = (await import(pathToFileURL(clientEntry).href)) as DivergeClient;
  const root = mkdtempSync(join(tmpdir(), "diverge-bundle-root-"));
  writeFileSync(join(root, "hello.txt"), "hello from the container\n");
  const served = mkdtempSync(join(tmpdir(), "diverge-bundle-served-"));
  writeFileSync(join(served, "from-provider.txt"), "the provider's file\n");
  const proxy = startProxy(command, [...args, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", "1", "--root", root, "--no-secrets-gate", "--quiet"], cwd);
  let connection: ContainerConnection | undefined;
  try {
    const line = await proxy.line;
    const port = Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)![1]);
    connection = await client.openContainer(`ws://127.0.0.1:${port}/`);
    const tree = connection.tree();
    for await (const frame of tree) {
      // The first frame is the Snapshot (told by its children, whatever its discriminant is named).
      expect(frame.children!.map((c) => c.name)).toEqual(["hello.txt"]);
      break;
    }
    if (!fuseMissing) {
      await connection.mount(["mnt"], served, { kind: "directory" });
      // Asynchronous reads only: this process is the provider answering them (a synchronous one would block its loop).
      expect(await readdir(join(root, "mnt"))).toEqual(["from-provider.txt"]);
      expect(await readFile(join(root, "mnt", "from-provider.txt"), "utf8")).toBe("the provider's file\n");
    }
  } finally {
    connection?.close();
    await new Promise((r) => setTimeout(r, 100));
    proxy.child.kill("SIGTERM");
  }
  expect(await proxy.exit).toBe(0);
  expect(proxy.stderr()).toBe("");
  rmSync(root, { recursive: true, force: true });
  rmSync(served, { recursive: true, force: true });
}

describe("the proxy as one file, run from an empty directory", () => {
  it("bundles every dependency but the optional native helpers, which it does without", () => {
    const source = readFileSync(join(built, "diverge-proxy.mjs"), "utf8");
    // ws's optional native helpers stay outside (they load a .node file from beside themselves):
    // required in a try block, so where they are absent ws uses its JavaScript fallback.
    // (The FUSE binding's loader names node-gyp-build to require it at run time; its code is not in the bundle.)
    expect(source.includes("No native build was found")).toBe(false);
    expect(/\\?"bufferutil\\?"/.test(source)).toBe(true);
    // Nothing else is imported but Node's own modules (the tests below run it with nothing beside it).
    expect(source.split("\n")[1]!.startsWith('import{createRequire as __divergeRequire}from"node:module";')).toBe(true);
  });

  it("node diverge-proxy.mjs: a provider begins tools and calls a tool through it; the paths transport answers an outward ask", async () => {
    const dir = alone("diverge-proxy.mjs");
    expect(existsSync(join(dir, "node_modules"))).toBe(false);
    await endToEnd(process.execPath, [join(dir, "diverge-proxy.mjs")], dir);
  }, 300_000);

  it.runIf(seaExpected)("the single executable (no node, no files beside it): the same", async () => {
    expect(bundleOutput).toContain(`wrote`);
    const dir = alone(seaName);
    await endToEnd(join(dir, seaName), [], dir);
  }, 300_000);

  it("carries the native package beside it: the FUSE binding, with its dependencies (a tree needs none)", () => {
    expect(bundleOutput).toMatch(/node_modules: @diverge\/fuse-native@[\d.]+/);
    expect(bundleOutput).not.toMatch(/@parcel\/watcher/);
    for (const name of ["@diverge/fuse-native", "node-gyp-build"]) expect(existsSync(join(built, "node_modules", name, "package.json")), name).toBe(true);
    expect(existsSync(join(built, "node_modules", "@parcel"))).toBe(false);
    // The binding is this repository's build (a change of one time alone, nanoseconds), prebuilt.
    const binding = join(built, "node_modules", "@diverge", "fuse-native", "prebuilds", `${process.platform}-${process.arch}`, "node.napi.node");
    const probe = spawnSync(process.execPath, ["-e", "process.stdout.write(String(require(process.argv[1]).utime_omit_ok))", binding], { encoding: "utf8" });
    expect(probe.stdout).toBe("1");
  });

  it(`node diverge-proxy.mjs with its node_modules/, started from elsewhere: a tree and a FUSE mount${fuseMissing ? ` (no mount: ${fuseMissing})` : ""}`, async () => {
    const dir = alone("diverge-proxy.mjs", true);
    const elsewhere = made(mkdtempSync(join(tmpdir(), "diverge-elsewhere-")));
    await treeAndMount(process.execPath, [join(dir, "diverge-proxy.mjs")], elsewhere);
  }, 300_000);

  it.runIf(seaExpected)(`the single executable with its node_modules/, started from elsewhere: a tree and a FUSE mount${fuseMissing ? ` (no mount: ${fuseMissing})` : ""}`, async () => {
    const dir = alone(seaName, true);
    const elsewhere = made(mkdtempSync(join(tmpdir(), "diverge-elsewhere-")));
    await treeAndMount(join(dir, seaName), [], elsewhere);
  }, 300_000);

  it(`a lone bundle serves a tree and, carrying the FUSE binding inside itself, a mount${fuseMissing ? ` (no mount: ${fuseMissing})` : ""}; it keeps serving`, async () => {
    const client = (await import(pathToFileURL(clientEntry).href)) as DivergeClient;
    const dir = alone("diverge-proxy.mjs");
    const root = mkdtempSync(join(tmpdir(), "diverge-bundle-root-"));
    writeFileSync(join(root, "f.txt"), "read without a native part");
    const served = mkdtempSync(join(tmpdir(), "diverge-bundle-served-"));
    writeFileSync(join(served, "from-provider.txt"), "the provider's file\n");
    const proxy = startProxy(process.execPath, [join(dir, "diverge-proxy.mjs"), "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--root", root, "--quiet"], dir);
    const port = Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(await proxy.line)![1]);
    const connection = await client.openContainer(`ws://127.0.0.1:${port}/`);
    try {
      for await (const frame of connection.tree()) {
        expect(frame.children!.map((c) => c.name)).toEqual(["f.txt"]);
        break;
      }
      if (fuseMissing) {
        const failure = await connection.mount(["mnt"], served, { kind: "directory" }).then(
          () => undefined,
          (error: unknown) => error as Error,
        );
        expect(failure).toBeDefined();
      } else {
        // No node_modules/ beside it: the binding the bundle carries is loaded (bundle-families.test.ts covers every family).
        await connection.mount(["mnt"], served, { kind: "directory" });
        expect(await readdir(join(root, "mnt"))).toEqual(["from-provider.txt"]);
        expect(await readFile(join(root, "mnt", "from-provider.txt"), "utf8")).toBe("the provider's file\n");
      }
      // The connection still serves: a read (no native part) answers.
      const chunks: Uint8Array[] = [];
      for await (const chunk of connection.read(["f.txt"])) chunks.push(chunk);
      expect(Buffer.concat(chunks).toString()).toBe("read without a native part");
    } finally {
      connection.close();
      proxy.child.kill("SIGTERM");
    }
    expect(await proxy.exit).toBe(0);
    rmSync(root, { recursive: true, force: true });
    rmSync(served, { recursive: true, force: true });
  }, 300_000);
});
