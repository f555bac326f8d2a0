// The lone bundle serves every family as the workspace build does (issue 35): `scripts/bundle.mjs`
// builds the bundle, its .mjs is copied ALONE into an empty temporary directory (no node_modules
// there or in any directory above it, so nothing of the workspace can be resolved) and run from
// there; the workspace provider (the built @diverge/client) runs the families on each transport.
// Every family: tools, info, secrets, both MCP directions, vault, postgres (to a real PostgreSQL),
// daemon, command, the filesystem, agents. fuse::mount (multiplexed) and /fuse/mount (paths) are
// real kernel mounts through the FUSE binding the bundle carries inside itself (before: "Cannot find module '@diverge/fuse-native'").
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import pg from "pg";
import WebSocket from "ws";
import { decodeClientFrame, encodeClientFrame, encodeServerFrame } from "@diverge/codec";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { exampleAgentRoot, startExampleAgent } from "@diverge/example-agent";
// freePort: the proxy's postgres listener, whose port its listening line does not give.
import { freePort, startThrowawayPostgres, type ThrowawayPostgres } from "../../client/test/multiplexed-postgres-server.js";
import type { Agent } from "../../client/src/index.js";
import type { AgenticLoopChunk } from "@diverge/codec";
import { isMounted, loadClient, packageDir, startProxyProcess, waitFor, type ProxyProcess } from "./proxy-process-support.js";
import { fuseLibraryVersion } from "../src/families/fuse/mount.js";

/**
 * The libfuse a mount was made with, told by the options the kernel holds for it (mountinfo's super
 * options): this package passes libfuse 2.9 `max_read`, never libfuse 3 (which wants none).
 */
function libfuseOfMount(mountPoint: string): 2 | 3 {
  const line = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .find((entry) => entry.split(" ")[4] === mountPoint);
  if (!line) throw new Error(`${mountPoint} is not in /proc/self/mountinfo`);
  return /[ ,]max_read=/.test(line.split(" - ")[1] ?? "") ? 2 : 3;
}

const fuseMissing = !existsSync("/dev/fuse") ? "no /dev/fuse" : process.getuid?.() !== 0 ? "not root" : undefined;
const work = mkdtempSync(join(tmpdir(), "diverge-bundle-families-"));
const built = join(work, "build");
let lone: string;
// The postgres pairs reach a real PostgreSQL through the bundle (the provider pipes its half to it).
let database: ThrowawayPostgres;

beforeAll(async () => {
  database = await startThrowawayPostgres();
}, 120_000);
beforeAll(() => {
  const result = spawnSync(process.execPath, [join(packageDir, "scripts", "bundle.mjs"), "--no-sea", "--no-natives", "--out", built], { encoding: "utf8", timeout: 240_000 });
  if (result.status !== 0) throw new Error(`bundle.mjs failed (${result.status ?? result.signal}): ${result.stdout}${result.stderr}`);
  expect(result.stdout).toMatch(/carried inside: @diverge\/fuse-native with its binding for /);
  // The bundle alone: nothing beside it, and no node_modules in any directory above it.
  const dir = mkdtempSync(join(tmpdir(), "diverge-lone-"));
  copyFileSync(join(built, "diverge-proxy.mjs"), join(dir, "diverge-proxy.mjs"));
  for (let at = dir; ; at = dirname(at)) {
    expect(existsSync(join(at, "node_modules")), `${at}/node_modules`).toBe(false);
    if (dirname(at) === at) break;
  }
  lone = join(dir, "diverge-proxy.mjs");
}, 300_000);
afterAll(async () => {
  await database?.stop();
  rmSync(work, { recursive: true, force: true });
  if (lone) rmSync(dirname(lone), { recursive: true, force: true });
});

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
});

/** A container root of its own (writable): the example container's DIVERGE.md and one file; and the provider's directory to mount. */
function places(): { root: string; served: string } {
  const root = mkdtempSync(join(tmpdir(), "diverge-families-root-"));
  writeFileSync(join(root, "DIVERGE.md"), readFileSync(join(exampleRoot, "DIVERGE.md")));
  writeFileSync(join(root, "hello.txt"), "hello from the container\n");
  const served = mkdtempSync(join(tmpdir(), "diverge-families-served-"));
  writeFileSync(join(served, "from-provider.txt"), "the provider's file\n");
  cleanups.push(() => {
    rmSync(root, { recursive: true, force: true });
    rmSync(served, { recursive: true, force: true });
  });
  return { root, served };
}

async function lonelyProxy(extra: string[]): Promise<ProxyProcess> {
  const proxy = await startProxyProcess(process.execPath, [lone], dirname(lone), ["--quiet", ...extra]);
  cleanups.push(async () => {
    proxy.child.kill("SIGKILL");
    await proxy.exit;
  });
  return proxy;
}

/** The program's database driver on the proxy's postgres listener: one query answered by the real database. */
async function selectThroughProxy(pgPort: number): Promise<string> {
  const driver = new pg.Client({ host: "127.0.0.1", port: pgPort, user: "postgres", database: "postgres", connectionTimeoutMillis: 60_000 });
  driver.on("error", () => {});
  cleanups.push(() => driver.end());
  await driver.connect();
  const { rows } = await driver.query<{ answer: string }>("select 'through the bundle' as answer");
  return rows[0]!.answer;
}

/** The program in the container: an MCP client of the proxy's program port. */
async function programClient(port: number): Promise<Client> {
  const program = new Client({ name: "program-in-the-container", version: "1.0.0" });
  await program.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  cleanups.push(() => program.close());
  return program;
}

const text = (value: string) => ({ content: [{ type: "text" as const, text: value }] });
const textOf = (result: unknown) => (result as { content: { text: string }[] }).content[0]!.text;
const chunksOf = async (stream: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>) => {
  const chunks: Uint8Array[] = [];
  for await (const chunk of stream as AsyncIterable<Uint8Array>) chunks.push(chunk);
  return Buffer.concat(chunks).toString();
};
const answers = {
  mcpCallTool: ({ params }: { params: { name: string } }) => ({ variant: "Result" as const, result: text(`the provider answered ${params.name}`) }),
  vaultGet: ({ key }: { key: Uint8Array }) => ({ variant: "Present" as const, value: Buffer.from(`value of ${Buffer.from(key).toString()}`) }),
};

describe("the lone bundle (its .mjs alone in an empty directory) serves every family", () => {
  it(`multiplexed: tools, info, secrets, outward MCP, vault, postgres, daemon, tree, read, write${fuseMissing ? "" : ", fuse::mount"}`, { timeout: 240_000 }, async () => {
    const client = await loadClient();
    const container = await startExampleContainer({ host: "127.0.0.1" });
    cleanups.push(() => container.close());
    const { root, served } = places();
    const pgPort = await freePort();
    const proxy = await lonelyProxy(["--app-port", String(container.port), "--root", root, "--pg-port", String(pgPort)]);
    const daemonFrames: string[] = [];
    const connection = await client.openContainer(`ws://127.0.0.1:${proxy.ports.provider}/`, {
      handlers: answers as never,
      onPostgres: (announced) => void client.pipePostgres(announced, { host: "127.0.0.1", port: database.port }).catch(() => {}),
      // The daemon: the provider's half answers each program request with one response and its finish.
      onDaemon: (announced) => {
        const half = announced.accept({
          data: (frame) => {
            const request = decodeClientFrame(frame);
            daemonFrames.push(request.variant);
            if (request.variant !== "Request") return;
            half.send(encodeServerFrame({ variant: "Response", scope: request.scope, channel: 0, payload: new Uint8Array([7]) }));
            half.send(encodeServerFrame({ variant: "ResponseFinish", scope: request.scope, channel: 0 }));
          },
          end: () => {},
        });
      },
    });
    cleanups.push(() => connection.close());
    // tools (the begin) and info
    const tools = await connection.beginTools({ arguments: { greeting: "Hello" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } });
    expect(tools.length).toBeGreaterThan(0);
    expect((await connection.info())?.frontMatter).toBeTypeOf("object");
    // secrets: the gate holds MCP until they are fed
    await connection.feedSecrets({ API_KEY: "bundle-key" });
    expect(textOf(await connection.mcp.callTool({ name: "greet", arguments: { name: "Ada" } }))).toBe("Hello, Ada!");
    // outward MCP: the program's call, answered by the provider on a begin-scope channel
    const program = await programClient(proxy.ports.program);
    expect(textOf(await program.callTool({ name: "outward-tool", arguments: {} }))).toBe("the provider answered outward-tool");
    // vault: the program's GET, answered by the provider
    const got = await fetch(`http://127.0.0.1:${proxy.ports.program}/vault/k1`);
    expect([got.status, await got.text()]).toEqual([200, "value of k1"]);
    // postgres: the program's driver, piped by the provider to the real database
    expect(await selectThroughProxy(pgPort)).toBe("through the bundle");
    // daemon: the program's frames to the provider's half and its answer back
    const daemon = new WebSocket(`ws://127.0.0.1:${proxy.ports.program}/daemon`);
    cleanups.push(() => daemon.terminate());
    const answered = new Promise<Buffer[]>((resolve) => {
      const got: Buffer[] = [];
      daemon.on("message", (data: Buffer) => got.push(data) === 2 && resolve(got));
    });
    await new Promise((resolve, reject) => daemon.once("open", resolve).once("error", reject));
    daemon.send(encodeClientFrame({ variant: "Request", scope: 5, channel: 0, payload: new Uint8Array([1]) }));
    expect((await answered).map((frame) => frame.toString("hex"))).toEqual(["02000000050000000007", "030000000500000000"]);
    expect(daemonFrames).toEqual(["Request"]);
    // filesystem: tree, read, write
    for await (const frame of connection.tree()) {
      expect((frame as { children: { name: string }[] }).children.map((c) => c.name).sort()).toEqual(["DIVERGE.md", "hello.txt"]);
      break;
    }
    expect(await chunksOf(connection.read(["hello.txt"]))).toBe("hello from the container\n");
    await connection.write(["written.txt"], new TextEncoder().encode("written by the provider"));
    expect(readFileSync(join(root, "written.txt"), "utf8")).toBe("written by the provider");
    if (!fuseMissing) {
      // fuse::mount: a real kernel mount through the binding the bundle carries
      await connection.mount(["mnt"], served, { kind: "directory" });
      expect(await isMounted(join(root, "mnt"))).toBe(true);
      // with the libfuse the workspace build uses (libfuse 3 where it loads): the bundle carries both builds
      expect(libfuseOfMount(join(root, "mnt"))).toBe(fuseLibraryVersion());
      expect(await readFile(join(root, "mnt", "from-provider.txt"), "utf8")).toBe("the provider's file\n");
      // nothing of the carried binding is left beside the bundle or in the temporary directory
      expect(readdirSync(dirname(lone))).toEqual(["diverge-proxy.mjs"]);
      // the provider going away ends the mount
      await connection.close();
      await waitFor(async () => !(await isMounted(join(root, "mnt"))), "the mount to go with its connection");
    }
  });

  it(`paths: tools, outward MCP, vault, command, postgres, tree, read, write${fuseMissing ? "" : ", /fuse/mount"}`, { timeout: 240_000 }, async () => {
    const client = await loadClient();
    const container = await startExampleContainer({ host: "127.0.0.1" });
    cleanups.push(() => container.close());
    const { root, served } = places();
    const pgPort = await freePort();
    const proxy = await lonelyProxy(["--app-port", String(container.port), "--root", root, "--no-secrets-gate", "--pg-port", String(pgPort)]);
    const url = `ws://127.0.0.1:${proxy.ports.provider}`;
    const mounts = new client.PathsMounts(url);
    const answering = client.connectProxy(url, {
      ...mounts.handlers(),
      ...(answers as object),
      raw: client.postgresOverPaths({ host: "127.0.0.1", port: database.port }),
      command: async function* ({ command }: { command: Uint8Array }) {
        yield { variant: "Item" as const, item: Buffer.from(`ran ${Buffer.from(command).toString()}`) };
      },
    } as never);
    cleanups.push(() => answering.close());
    await answering.whenConnected({ timeoutMs: 30_000 });
    // tools: /tool/*
    const tools = new client.PathsTools(url);
    expect((await tools.listTools()).tools.length).toBeGreaterThan(0);
    expect(textOf(await tools.callTool({ name: "greet", arguments: { name: "Ada" } }))).toBe("Hello, Ada!");
    // outward MCP and vault on /requests
    const program = await programClient(proxy.ports.program);
    expect(textOf(await program.callTool({ name: "outward-tool", arguments: {} }))).toBe("the provider answered outward-tool");
    const got = await fetch(`http://127.0.0.1:${proxy.ports.program}/vault/k2`);
    expect([got.status, await got.text()]).toEqual([200, "value of k2"]);
    // command: the program's POST /command, run by the provider, NDJSON back
    const ran = await fetch(`http://127.0.0.1:${proxy.ports.program}/command`, { method: "POST", body: "echo" });
    const lines = (await ran.text()).trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines[0]).toEqual({ item: Buffer.from("ran echo").toString("base64") });
    // postgres: /requests kind 11 and /postgres/{channel} to the real database
    expect(await selectThroughProxy(pgPort)).toBe("through the bundle");
    // filesystem on its paths
    const fs = client.filesystemPaths(url);
    for await (const frame of fs.tree()) {
      expect((frame as { children: { name: string }[] }).children.map((c) => c.name).sort()).toEqual(["DIVERGE.md", "hello.txt"]);
      break;
    }
    expect(await chunksOf(fs.read(["hello.txt"]))).toBe("hello from the container\n");
    await fs.write(["written.txt"], new TextEncoder().encode("written over paths"));
    expect(readFileSync(join(root, "written.txt"), "utf8")).toBe("written over paths");
    if (!fuseMissing) {
      mkdirSync(join(root, "deeper"));
      await mounts.mount(["deeper", "mnt"], served);
      expect(libfuseOfMount(join(root, "deeper", "mnt"))).toBe(fuseLibraryVersion());
      expect(await readFile(join(root, "deeper", "mnt", "from-provider.txt"), "utf8")).toBe("the provider's file\n");
      expect(readdirSync(dirname(lone))).toEqual(["diverge-proxy.mjs"]);
      // SIGTERM: the proxy unmounts before it exits
      proxy.child.kill("SIGTERM");
      expect((await proxy.exit).code).toBe(0);
      expect(await isMounted(join(root, "deeper", "mnt"))).toBe(false);
    }
  });

  it.each(["multiplexed", "paths"] as const)("%s: an agent container (begin, info, a message, its chunks to the turn's end)", { timeout: 240_000 }, async (transport) => {
    const client = await loadClient();
    let programPort = 0;
    const program = await startExampleAgent({ port: 0, mcpUrl: () => `http://127.0.0.1:${programPort}/mcp` });
    cleanups.push(() => program.close());
    const proxy = await lonelyProxy(["--app-port", String(program.port), "--root", exampleAgentRoot, ...(transport === "paths" ? ["--no-secrets-gate"] : [])]);
    programPort = proxy.ports.program;
    const url = `ws://127.0.0.1:${proxy.ports.provider}/`;
    let agent: Agent;
    if (transport === "multiplexed") {
      const connection = await client.openContainer(url);
      cleanups.push(() => connection.close());
      agent = await connection.beginAgent({ arguments: { name: "bundled" } });
      expect((await agent.info())?.frontMatter.title).toBe("Example agent");
      await agent.feedSecrets({ API_KEY: "k" });
    } else {
      const paths = await client.beginPathsAgent(url, { arguments: { name: "bundled" } });
      cleanups.push(() => paths.close());
      agent = paths;
      expect((await agent.info())?.frontMatter.arguments).toMatchObject({ type: "object" });
    }
    expect(program.registered).toMatchObject({ name: "bundled" });
    const seen: AgenticLoopChunk[] = [];
    // The turn ends with its usage chunk.
    const ended = (async () => {
      for await (const chunk of agent.chunks()) if (seen.push(chunk) && chunk.type === "usage") return;
    })();
    expect(await agent.enqueue("k1", "hello")).toBe("delivered");
    await ended;
    const { messages } = client.foldAll(seen);
    expect(messages.some((message) => message.kind === "text" && message.text.includes("You said: hello"))).toBe(true);
  });
});
