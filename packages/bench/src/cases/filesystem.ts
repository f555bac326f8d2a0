// Case 10: the container's filesystem (issue 17 §5). The proxy runs in a process of its own (child.ts
// `filesystem <root>`), so its RSS is its alone; this process is the provider.
//   - read and write of one large file (256 MiB; 8 MiB in quick mode) through `filesystem::read` /
//     `::write` (multiplexed) and `/filesystem/read` / `/write` (paths), against `fs.readFile` /
//     `fs.writeFile` here: MB/s, the ratio, and the peak RSS of the proxy and of this process while
//     the bytes move — far more bytes than the 16 MiB message limit, so a proxy that held the file
//     (or did not wait for its socket) would show it as RSS;
//   - a FUSE mount the provider serves from a directory of its own: a program in another process
//     (fs-program.ts) writes and reads one large file sequentially and creates 1,000 small files
//     through the mount, and the same in the provider's directory directly;
//   - the tree: the Snapshot of 10,000 files (time to the first frame, its encoded bytes) and the
//     latency from a change on disk to its delta arriving here (p50 over several changes).
// Only 127.0.0.1 is dialled; every wait is bounded in time.
import { execFile, spawn, spawnSync } from "node:child_process";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, realpath, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { encodeTreeMessage, encodeTreeResponse, type FiletreeFrame } from "@diverge/codec";
import { connectProxy, filesystemPaths, openContainer, PathsMounts, type MultiplexedConnection, type PathsConnection, type TreeStream } from "@diverge/client";
import { fuseUnavailable } from "@diverge/server";
import type { FsProgramResult } from "../fs-program.js";
import { startChild, type Child } from "../processes.js";
import type { SuiteReport, Table, Target } from "../run.js";

const MiB = 1024 * 1024;
const MB = 1e6;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const programScript = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "dist", "fs-program.js");

/** The proxy's RSS may rise at most this much while a large file moves through it. */
const RSS_RISE_LIMIT = 64 * MiB;

export interface Sizes {
  /** The large file read and written through the proxy. */
  readonly transfer: number;
  /** The large file written and read through a FUSE mount on the multiplexed transport. */
  readonly fuseFile: number;
  /** The same on the paths transport, whose asks carry whole files (each kernel read or write moves the whole file). */
  readonly pathsFuseFile: number;
  /** Small files created through each mount. */
  readonly smallFiles: number;
  readonly smallFilesPaths: number;
  /** Files of the tree, in directories of 100. */
  readonly treeFiles: number;
  /** Changes whose delta latency is measured, per transport. */
  readonly changes: number;
}

export const FULL_SIZES: Sizes = { transfer: 256 * MiB, fuseFile: 64 * MiB, pathsFuseFile: 1 * MiB, smallFiles: 1000, smallFilesPaths: 200, treeFiles: 10_000, changes: 15 };
export const QUICK_SIZES: Sizes = { transfer: 4 * MiB, fuseFile: 4 * MiB, pathsFuseFile: 128 * 1024, smallFiles: 100, smallFilesPaths: 10, treeFiles: 1000, changes: 3 };

/** A full GC of this process (the bench runs without --expose-gc). */
const gcSelf: () => void = (() => {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
})();

export interface Moved {
  readonly what: string;
  readonly bytes: number;
  readonly seconds: number;
  /** The proxy's RSS after a full GC before the transfer, and the highest sampled during it (undefined for the local baseline). */
  readonly proxyBefore?: number;
  readonly proxyPeak?: number;
  /** This process's (the provider's: the reader or the writer) RSS before and at its highest. */
  readonly selfBefore: number;
  readonly selfPeak: number;
  readonly samples: number;
  /** The highest proxy RSS sampled in the first and in the last quarter of the transfer: flat means no climb between them. */
  readonly proxyFirstQuarterPeak?: number;
  readonly proxyLastQuarterPeak?: number;
  /** CPU time (user + system) the proxy and this process spent on the transfer, in seconds: what the work costs whatever else the machine runs. */
  readonly proxyCpu?: number;
  readonly selfCpu: number;
}

/** Runs `work` (which returns the bytes it moved) while sampling both RSSes every 25 ms. */
async function measured(what: string, proxy: Child | undefined, work: () => Promise<number>): Promise<Moved> {
  gcSelf();
  gcSelf();
  const before = proxy ? await proxy.memory() : undefined;
  const proxyBefore = before?.rss;
  const selfBefore = process.memoryUsage.rss();
  const selfCpuBefore = process.cpuUsage();
  let proxyPeak = proxyBefore;
  let selfPeak = selfBefore;
  let samples = 0;
  let sampling = true;
  const timeline: { at: number; rss: number }[] = [];
  const sampler = (async () => {
    while (sampling) {
      if (proxy) {
        const m = await proxy.memory(false);
        proxyPeak = Math.max(proxyPeak!, m.rss);
        timeline.push({ at: performance.now(), rss: m.rss });
      }
      selfPeak = Math.max(selfPeak, process.memoryUsage.rss());
      samples++;
      await sleep(25);
    }
  })();
  const start = performance.now();
  let bytes: number;
  try {
    bytes = await work();
  } finally {
    sampling = false;
    await sampler;
  }
  const end = performance.now();
  const seconds = (end - start) / 1000;
  const selfCpu = cpuSeconds(process.cpuUsage(selfCpuBefore));
  selfPeak = Math.max(selfPeak, process.memoryUsage.rss());
  const after = proxy ? await proxy.memory(false) : undefined;
  const proxyCpu = before?.cpu !== undefined && after?.cpu !== undefined ? (after.cpu - before.cpu) / 1e6 : undefined;
  const quarterPeak = (from: number, to: number) => {
    const inside = timeline.filter((s) => s.at >= start + from * (end - start) && s.at <= start + to * (end - start)).map((s) => s.rss);
    return inside.length ? Math.max(...inside) : undefined;
  };
  return {
    what,
    bytes,
    seconds,
    proxyBefore,
    proxyPeak,
    selfBefore,
    selfPeak,
    samples,
    proxyFirstQuarterPeak: quarterPeak(0, 0.25),
    proxyLastQuarterPeak: quarterPeak(0.75, 1),
    proxyCpu,
    selfCpu,
  };
}

/** Reads the stream to its end; `paceMs` waits that long after every piece (a reader slower than the wire). */
async function drain(stream: ReadableStream<Uint8Array>, hash: ReturnType<typeof createHash>, paceMs = 0): Promise<number> {
  const reader = stream.getReader();
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return bytes;
    bytes += value.length;
    hash.update(value);
    if (paceMs) await sleep(paceMs);
  }
}

/** The paced reader's wait after each piece (pieces are up to 2 MiB): at most ~100 MB/s. */
const PACE_MS = 20;

/** The content of every large file here: one 2 MiB pattern, repeated (never changed, so a socket may hold it). */
const PATTERN = new Uint8Array(2 * MiB).map((_, i) => (i * 7 + (i >> 11)) & 0xff);

function* pieces(total: number): Generator<Uint8Array, void, void> {
  for (let at = 0; at < total; at += PATTERN.length) yield PATTERN.subarray(0, Math.min(PATTERN.length, total - at));
}

function digestOf(total: number): string {
  const hash = createHash("sha256");
  for (const piece of pieces(total)) hash.update(piece);
  return hash.digest("hex");
}

const mbps = (m: { bytes: number; seconds: number }) => m.bytes / MB / m.seconds;
const cpuSeconds = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1e6;
/** CPU milliseconds per MiB moved. */
const cpuPerMiB = (cpu: number | undefined, bytes: number) => (cpu === undefined ? "—" : `${((cpu * 1000) / (bytes / MiB)).toFixed(1)}`);
const mb = (bytes: number) => `${(bytes / MiB).toFixed(1)} MB`;
const rise = (before: number | undefined, peak: number | undefined) => (before === undefined || peak === undefined ? NaN : peak - before);
const signed = (bytes: number) => `${bytes >= 0 ? "+" : ""}${(bytes / MiB).toFixed(1)} MB`;

async function transfers(proxy: Child, root: string, connection: MultiplexedConnection, url: string, total: number, log: (line: string) => void): Promise<{ reads: Moved[]; writes: Moved[] }> {
  const paths = filesystemPaths(url);
  const big = join(root, "big.bin");
  await writeFile(big, pieces(total));
  const expected = digestOf(total);
  const check = (what: string, hash: ReturnType<typeof createHash>) => {
    if (hash.digest("hex") !== expected) throw new Error(`${what}: the bytes read differ from the file's`);
  };
  const reads: Moved[] = [];
  log(`  filesystem: reading ${total / MiB} MiB three ways`);
  // Warm the page cache first, so every read below reads the same cached file.
  await readFile(big);
  reads.push(
    await measured("fs.readFile (local)", undefined, async () => {
      const hash = createHash("sha256");
      const bytes = await readFile(big);
      hash.update(bytes);
      check("fs.readFile", hash);
      return bytes.length;
    }),
  );
  reads.push(
    await measured("filesystem::read (multiplexed)", proxy, async () => {
      const hash = createHash("sha256");
      const bytes = await drain(connection.read(["big.bin"]), hash);
      check("filesystem::read", hash);
      return bytes;
    }),
  );
  reads.push(
    await measured("/filesystem/read (paths)", proxy, async () => {
      const hash = createHash("sha256");
      const bytes = await drain(paths.read(["big.bin"]), hash);
      check("/filesystem/read", hash);
      return bytes;
    }),
  );
  log(`  filesystem: reading ${total / MiB} MiB with a reader slower than the wire, both ways`);
  reads.push(
    await measured("filesystem::read (multiplexed), paced reader", proxy, async () => {
      const hash = createHash("sha256");
      const bytes = await drain(connection.read(["big.bin"]), hash, PACE_MS);
      check("filesystem::read", hash);
      return bytes;
    }),
  );
  reads.push(
    await measured("/filesystem/read (paths), paced reader", proxy, async () => {
      const hash = createHash("sha256");
      const bytes = await drain(paths.read(["big.bin"]), hash, PACE_MS);
      check("/filesystem/read", hash);
      return bytes;
    }),
  );
  // The floor a relay of a file's bytes reaches here: one plain TCP hop (socat, a process of its own)
  // reading the file and sending it. Reported beside the proxy's rows, not judged.
  if (socatAvailable()) {
    reads.push(
      await measured("socat: file → TCP (one plain relay)", undefined, async () => {
        const hash = createHash("sha256");
        const bytes = await socatFromFile(big, hash);
        check("socat", hash);
        return bytes;
      }),
    );
  }
  await rm(big);
  log(`  filesystem: writing ${total / MiB} MiB three ways`);
  const written = async (name: string) => {
    const size = (await stat(join(root, name))).size;
    if (size !== total) throw new Error(`${name}: ${size} bytes written, not ${total}`);
    await rm(join(root, name));
    return size;
  };
  const writes: Moved[] = [];
  writes.push(
    await measured("fs.writeFile (local)", undefined, async () => {
      await writeFile(join(root, "local.bin"), pieces(total));
      return written("local.bin");
    }),
  );
  writes.push(
    await measured("filesystem::write (multiplexed)", proxy, async () => {
      await connection.write(["mux.bin"], pieces(total));
      return written("mux.bin");
    }),
  );
  writes.push(
    await measured("/filesystem/write (paths)", proxy, async () => {
      await paths.write(["paths.bin"], pieces(total));
      return written("paths.bin");
    }),
  );
  // The floor a relay of bytes into a file reaches here: one plain TCP hop (socat, a process of its
  // own) writing what it reads to the file. Reported beside the proxy's rows, not judged.
  if (socatAvailable()) {
    writes.push(
      await measured("socat: TCP → file (one plain relay)", undefined, async () => {
        await socatIntoFile(join(root, "socat.bin"), pieces(total));
        return written("socat.bin");
      }),
    );
  }
  return { reads, writes };
}

function socatAvailable(): boolean {
  return spawnSync("socat", ["-V"], { stdio: "ignore" }).status === 0;
}

/** Sends the pieces over loopback TCP to a `socat -u TCP-LISTEN:… OPEN:<file>`, and waits for it to exit. */
async function socatIntoFile(file: string, content: Iterable<Uint8Array>): Promise<void> {
  const port = await freePort();
  const relay = spawn("socat", ["-u", `TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr`, `OPEN:${file},creat,trunc`], { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => relay.once("exit", () => resolve()));
  const socket = await connectWhenListening(port);
  for (const piece of content) if (!socket.write(piece)) await new Promise((resolve) => socket!.once("drain", resolve));
  socket.end();
  await exited;
}

/** Reads a file through a `socat -u OPEN:<file> TCP-LISTEN:…` over loopback TCP into `hash`; the bytes read. */
async function socatFromFile(file: string, hash: ReturnType<typeof createHash>): Promise<number> {
  const port = await freePort();
  const relay = spawn("socat", ["-u", `OPEN:${file},rdonly`, `TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr`], { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => relay.once("exit", () => resolve()));
  const socket = await connectWhenListening(port);
  let bytes = 0;
  socket.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    hash.update(chunk);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once("end", () => resolve());
    socket.once("error", reject);
  });
  await exited;
  return bytes;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A connection to a socat about to listen on `port`, tried until it listens (10 s at most). */
async function connectWhenListening(port: number): Promise<Socket> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const socket = await new Promise<Socket | undefined>((resolve) => {
      const probe = connect(port, "127.0.0.1");
      probe.once("connect", () => resolve(probe));
      probe.once("error", () => resolve(undefined));
    });
    if (socket) return socket;
    if (Date.now() > deadline) throw new Error("socat did not listen within 10 s");
    await sleep(20);
  }
}

export interface FuseRun extends FsProgramResult {
  readonly where: string;
}

function runProgram(dir: string, name: string, writeBytes: number, readName: string, files: number): Promise<FsProgramResult> {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [programScript, dir, `${name}.w`, String(writeBytes), readName, `${name}-small`, String(files)], { timeout: 120_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`the program in ${dir} failed: ${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout) as FsProgramResult),
    ),
  );
}

async function fuse(root: string, connection: MultiplexedConnection, url: string, sizes: Sizes, log: (line: string) => void): Promise<FuseRun[]> {
  const provider = join(dirname(root), "provider");
  await mkdir(provider);
  await writeFile(join(provider, "source.bin"), pieces(sizes.fuseFile));
  await writeFile(join(provider, "source-paths.bin"), pieces(sizes.pathsFuseFile));
  const runs: FuseRun[] = [];
  log(`  filesystem: the provider's directory directly`);
  runs.push({ where: "the provider's directory directly", ...(await runProgram(provider, "direct", sizes.fuseFile, "source.bin", sizes.smallFiles)) });
  log(`  filesystem: a FUSE mount over the multiplexed connection`);
  await connection.mount(["mnt-mux"], provider, { kind: "directory" });
  runs.push({ where: "FUSE mount, fuse::mount (multiplexed)", ...(await runProgram(join(root, "mnt-mux"), "mux", sizes.fuseFile, "source.bin", sizes.smallFiles)) });
  log(`  filesystem: a FUSE mount over the paths transport`);
  const mounts = new PathsMounts(url);
  const answering: PathsConnection = connectProxy(url, { ...mounts.handlers() });
  try {
    await answering.whenConnected({ timeoutMs: 10_000 });
    await mounts.mount(["mnt-paths"], provider, { kind: "directory" });
    runs.push({
      where: "FUSE mount, /fuse/mount (paths; whole files)",
      ...(await runProgram(join(root, "mnt-paths"), "paths", sizes.pathsFuseFile, "source-paths.bin", sizes.smallFilesPaths)),
    });
  } finally {
    await answering.close();
  }
  return runs;
}

export interface TreeRun {
  readonly transport: string;
  readonly nodes: number;
  readonly snapshotSeconds: number;
  readonly snapshotBytes: number;
  /** Milliseconds from a file's write returning to its delta arriving here, sorted. */
  readonly deltaMs: readonly number[];
  /** Snapshots that arrived instead of a delta (the watcher lost events). */
  readonly resnapshots: number;
}

function countNodes(nodes: readonly { variant: string; children?: unknown }[]): number {
  let n = 0;
  for (const node of nodes) {
    n++;
    if (node.variant === "Directory") n += countNodes((node as { children: { variant: string }[] }).children);
  }
  return n;
}

async function treeRun(transport: string, root: string, open: () => TreeStream, encode: (frame: FiletreeFrame) => Uint8Array, sizes: Sizes): Promise<TreeRun> {
  const start = performance.now();
  const stream = open();
  const frames = stream[Symbol.asyncIterator]();
  const next = async (ms: number): Promise<FiletreeFrame> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${transport}: no frame within ${ms / 1000} s`)), ms)));
    try {
      const step = await Promise.race([frames.next(), timeout]);
      if (step.done) throw new Error(`${transport}: the tree ended`);
      return step.value;
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    const snapshot = await next(60_000);
    const snapshotSeconds = (performance.now() - start) / 1000;
    if (snapshot.variant !== "Snapshot") throw new Error(`${transport}: the first frame is ${snapshot.variant}`);
    const deltaMs: number[] = [];
    let resnapshots = 0;
    const dirs = Math.max(1, Math.floor(sizes.treeFiles / 100));
    for (let i = 0; i < sizes.changes; i++) {
      // An existing file each time (a Modified delta): directory d<k> holds f<100k> to f<100k+99>.
      const d = i % dirs;
      const path = ["tree", `d${d}`, `f${d * 100 + Math.floor(i / dirs)}.txt`];
      await sleep(50);
      await writeFile(join(root, ...path), `changed ${transport} ${i}\n`);
      const written = performance.now();
      for (;;) {
        const frame = await next(10_000);
        if (frame.variant === "Snapshot") {
          resnapshots++;
          break;
        }
        if (frame.path.join("/") === path.join("/")) {
          deltaMs.push(performance.now() - written);
          break;
        }
      }
    }
    return { transport, nodes: countNodes(snapshot.children), snapshotSeconds, snapshotBytes: encode(snapshot).length, deltaMs: deltaMs.sort((a, b) => a - b), resnapshots };
  } finally {
    stream.stop();
    await frames.return?.();
  }
}

async function makeTree(root: string, files: number): Promise<void> {
  for (let d = 0; d * 100 < files; d++) {
    const dir = join(root, "tree", `d${d}`);
    await mkdir(dir, { recursive: true });
    await Promise.all(Array.from({ length: Math.min(100, files - d * 100) }, (_, f) => writeFile(join(dir, `f${d * 100 + f}.txt`), `file ${d * 100 + f}\n`)));
  }
}

const quantile = (sorted: readonly number[], q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN);

export interface FilesystemResult {
  readonly sizes: Sizes;
  readonly reads: readonly Moved[];
  readonly writes: readonly Moved[];
  readonly fuse?: readonly FuseRun[];
  /** Why the FUSE part did not run. */
  readonly fuseSkipped?: string;
  readonly tree: readonly TreeRun[];
}

export async function filesystemSuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const sizes = quick ? QUICK_SIZES : FULL_SIZES;
  const base = await realpath(await mkdtemp(join(tmpdir(), "diverge-bench-fs-")));
  const root = join(base, "container");
  await mkdir(root);
  let proxy: Child | undefined;
  let connection: MultiplexedConnection | undefined;
  try {
    log(`  filesystem: a tree of ${sizes.treeFiles} files`);
    await makeTree(root, sizes.treeFiles);
    proxy = await startChild(["filesystem", root]);
    const url = `ws://127.0.0.1:${proxy.ready.port}`;
    connection = await openContainer(`${url}/`);
    const paths = filesystemPaths(url);
    const tree: TreeRun[] = [];
    tree.push(await treeRun("multiplexed", root, () => connection!.tree(), (frame) => encodeTreeResponse({ variant: "Frame", frame }), sizes));
    tree.push(await treeRun("paths", root, () => paths.tree(), (frame) => encodeTreeMessage({ variant: "Frame", frame }), sizes));
    await rm(join(root, "tree"), { recursive: true });

    const { reads, writes } = await transfers(proxy, root, connection, url, sizes.transfer, log);

    const fuseSkipped = fuseUnavailable();
    let fuseRuns: FuseRun[] | undefined;
    if (fuseSkipped) log(`  filesystem: FUSE part skipped: ${fuseSkipped}`);
    else fuseRuns = await fuse(root, connection, url, sizes, log);

    const result: FilesystemResult = { sizes, reads, writes, fuse: fuseRuns, fuseSkipped: fuseSkipped ? `FUSE part skipped: ${fuseSkipped}` : undefined, tree };
    return { result, tables: tablesOf(result), targets: targetsOf(result) };
  } finally {
    await connection?.close();
    // The proxy unmounts its FUSE mounts as it closes.
    await proxy?.close();
    await rm(base, { recursive: true, force: true }).catch((problem: unknown) => log(`  filesystem: could not remove ${base}: ${(problem as Error).message}`));
  }
}

function climbOf(m: Moved): string {
  if (m.proxyFirstQuarterPeak === undefined || m.proxyLastQuarterPeak === undefined) return "no climb measured";
  return signed(m.proxyLastQuarterPeak - m.proxyFirstQuarterPeak);
}

function transferTargets(moved: readonly Moved[], verb: "read" | "write"): Target[] {
  const local = moved[0]!;
  const floor = moved.find((m) => m.what.startsWith("socat"));
  return moved.slice(1).filter((m) => m !== floor).map((m): Target => {
    const proxyRise = rise(m.proxyBefore, m.proxyPeak);
    if (m.what.endsWith("paced reader")) {
      // The provider's side: a reader slower than the wire should make the proxy wait, not the provider hold the file.
      const selfRise = m.selfPeak - m.selfBefore;
      return {
        case: 10,
        what: `${m.what}, ${mb(m.bytes)}`,
        goal: `the reading provider's RSS rise ≤ ${RSS_RISE_LIMIT / MiB} MB (and the proxy's) with a reader slower than the wire`,
        value: `provider ${signed(selfRise)} (${mb(m.selfBefore)} → ${mb(m.selfPeak)}); proxy ${signed(proxyRise)}; ${mbps(m).toFixed(0)} MB/s`,
        met: selfRise <= RSS_RISE_LIMIT && proxyRise <= RSS_RISE_LIMIT,
      };
    }
    return {
      case: 10,
      what: `${m.what}, ${mb(m.bytes)}`,
      goal: `proxy RSS rise ≤ ${RSS_RISE_LIMIT / MiB} MB while moving ${(m.bytes / MiB).toFixed(0)} MiB`,
      value:
        `proxy ${signed(proxyRise)} (${mb(m.proxyBefore!)} → ${mb(m.proxyPeak!)}, ${m.samples} samples; ${climbOf(m)} from the first quarter's peak to the last's); the ${verb === "read" ? "reading" : "writing"} provider ${signed(m.selfPeak - m.selfBefore)}; ` +
        `${mbps(m).toFixed(0)} MB/s = ${(mbps(m) / mbps(local)).toFixed(2)}× ${local.what.replace(/ \(local\)$/, "")}` +
        (floor ? `, ${(mbps(m) / mbps(floor)).toFixed(2)}× one plain TCP relay ${verb === "read" ? "of the file" : "into the file"} (socat, ${mbps(floor).toFixed(0)} MB/s)` : ""),
      met: proxyRise <= RSS_RISE_LIMIT,
    };
  });
}

function targetsOf(r: FilesystemResult): Target[] {
  const targets: Target[] = [...transferTargets(r.reads, "read"), ...transferTargets(r.writes, "write")];
  if (r.fuse) {
    const direct = r.fuse[0]!;
    for (const run of r.fuse.slice(1)) {
      targets.push({
        case: 10,
        what: run.where,
        goal: "reported",
        value:
          `write ${mbps({ bytes: run.writeBytes, seconds: run.writeSeconds }).toFixed(1)} MB/s, read ${mbps({ bytes: run.readBytes, seconds: run.readSeconds }).toFixed(1)} MB/s (${mb(run.writeBytes)}), ` +
          `${(run.files / run.filesSeconds).toFixed(0)} small files/s (directly: ${(direct.files / direct.filesSeconds).toFixed(0)}/s)`,
        met: null,
      });
    }
  } else {
    targets.push({ case: 10, what: "FUSE mounts", goal: "reported", value: r.fuseSkipped ?? "skipped", met: null });
  }
  for (const t of r.tree) {
    targets.push({
      case: 10,
      what: `tree (${t.transport}): Snapshot of ${t.nodes} nodes, then a delta per change`,
      goal: "reported",
      value: `Snapshot in ${(t.snapshotSeconds * 1000).toFixed(0)} ms, ${(t.snapshotBytes / 1024).toFixed(0)} KB; delta p50 ${quantile(t.deltaMs, 0.5).toFixed(1)} ms (${t.deltaMs.length} changes${t.resnapshots ? `, ${t.resnapshots} fresh Snapshots` : ""})`,
      met: null,
    });
  }
  return targets;
}

function tablesOf(r: FilesystemResult): Table[] {
  const transferRows = (moved: readonly Moved[]) => {
    const local = moved[0]!;
    return moved.map((m) => [
      m.what,
      mb(m.bytes),
      (m.seconds * 1000).toFixed(0),
      mbps(m).toFixed(0),
      `${(mbps(m) / mbps(local)).toFixed(2)}×`,
      m.proxyBefore === undefined ? "—" : `${mb(m.proxyBefore)} → ${mb(m.proxyPeak!)} (${signed(rise(m.proxyBefore, m.proxyPeak))})`,
      m.proxyBefore === undefined ? "—" : climbOf(m),
      `${mb(m.selfBefore)} → ${mb(m.selfPeak)} (${signed(m.selfPeak - m.selfBefore)})`,
      cpuPerMiB(m.proxyCpu, m.bytes),
      cpuPerMiB(m.selfCpu, m.bytes),
    ]);
  };
  const tables: Table[] = [
    {
      title: "Case 10: one large file through the proxy",
      columns: ["how", "bytes", "ms", "MB/s", "ratio to local", "proxy RSS (before → peak)", "proxy RSS climb, 1st → last quarter", "provider RSS (before → peak)", "CPU ms/MiB, proxy", "CPU ms/MiB, provider"],
      rows: [...transferRows(r.reads), ...transferRows(r.writes)],
      notes: [
        "MB/s are 10⁶ bytes a second; RSS in MiB. The local fs.readFile holds the whole file, so its own RSS rises by the file's size; the proxy's must not.",
        "CPU ms/MiB: user + system time each process spent per MiB moved (the local rows: this process alone) — what the work costs, however busy the machine was.",
        `The paced reader waits ${PACE_MS} ms after each piece it takes (at most ~100 MB/s): what arrives faster than it reads is held by the provider's read stream.`,
      ],
    },
  ];
  if (r.fuse) {
    const direct = r.fuse[0]!;
    const speed = (bytes: number, seconds: number) => mbps({ bytes, seconds });
    tables.push({
      title: "Case 10: a FUSE mount served by the provider",
      columns: ["where the program works", "file", "sequential write MB/s", "sequential read MB/s", "small files", "small files/s (create+write+close)", "ratio to the directory"],
      rows: r.fuse.map((run) => [
        run.where,
        mb(run.writeBytes),
        speed(run.writeBytes, run.writeSeconds).toFixed(1),
        speed(run.readBytes, run.readSeconds).toFixed(1),
        String(run.files),
        (run.files / run.filesSeconds).toFixed(0),
        `write ${(speed(run.writeBytes, run.writeSeconds) / speed(direct.writeBytes, direct.writeSeconds)).toFixed(3)}×, read ${(speed(run.readBytes, run.readSeconds) / speed(direct.readBytes, direct.readSeconds)).toFixed(3)}×, small ${(run.files / run.filesSeconds / (direct.files / direct.filesSeconds)).toFixed(3)}×`,
      ]),
      notes: ["The program (fs-program.ts) runs in a process of its own and moves 1 MiB per write() and read(). The paths transport's asks carry whole files, so it moves a smaller file."],
    });
  } else {
    tables.push({ title: "Case 10: a FUSE mount served by the provider", columns: ["skipped"], rows: [[r.fuseSkipped ?? "skipped"]] });
  }
  tables.push({
    title: "Case 10: the tree",
    columns: ["transport", "Snapshot nodes", "Snapshot ms", "Snapshot bytes", "delta p50 ms", "delta max ms", "changes"],
    rows: r.tree.map((t) => [
      t.transport,
      String(t.nodes),
      (t.snapshotSeconds * 1000).toFixed(0),
      String(t.snapshotBytes),
      quantile(t.deltaMs, 0.5).toFixed(1),
      (t.deltaMs[t.deltaMs.length - 1] ?? NaN).toFixed(1),
      `${t.deltaMs.length}${t.resnapshots ? ` (+${t.resnapshots} fresh Snapshots)` : ""}`,
    ]),
    notes: ["Snapshot ms: from opening the tree to its first frame here (the proxy walks the tree and arms the watcher). Delta: from the write returning to the frame arriving."],
  });
  return tables;
}
