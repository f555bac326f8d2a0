// Case 5, the families' rows: memory that grew without bound before issue 24, measured from outside
// with the kernel's own count of each process's peak RSS (getrusage's maxRSS, /proc's VmHWM).
//   - a tree Snapshot of 100,000 and 200,000 files on both transports: the proxy's peak beside the
//     Snapshot's size and beside a bare Node walk of the same tree in a fresh process, the floor any
//     Node program pays (every entry stat'ed at once cost +540 MB for a 2.8 MB Snapshot before);
//   - a command that writes faster than the program reads (`yes`), its answer read with pauses: the
//     proxy's and the provider's (`diverge connect --command-exec`) peaks (+~800 MB in 6 s before:
//     nothing paused the executable).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from "node:fs";
import { request } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { encodeFiletreeFrame, encodeFilesystemPathsRequest } from "@diverge/codec";
import { openContainer } from "@diverge/client";
import { WebSocket } from "ws";
import { startChild, type Child } from "../processes.js";
import type { Target } from "../run.js";

const MB = 1024 * 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface SnapshotMemory {
    /** The tree: `N files`, or `N files in M directories`. */
    readonly tree: string;
    readonly files: number;
    readonly transport: "paths" | "multiplexed";
    readonly messageBytes: number;
    readonly rssBefore: number;
    readonly rssPeak: number;
    /** heapUsed + external: after a full GC before the tree, and the highest of samples taken every 20 ms while it is made. */
    readonly heapBefore: number;
    readonly heapPeak: number;
    /** heapUsed + external after a full GC once the Snapshot is sent: what the watch keeps (its shadow of the tree). */
    readonly heapAfter: number;
    readonly samples: number;
}

export interface FamiliesMemory {
  /** The proxy's first tree message on each transport, for each tree size. */
  readonly snapshots: readonly SnapshotMemory[];
  /** A bare Node walk of the same trees (readdir, lstat 32 at a time, nothing kept), by size. */
  readonly bareWalks: readonly { readonly tree: string; readonly rssBefore: number; readonly rssPeak: number }[];
  readonly command: {
    readonly bytesRead: number;
    readonly pauses: number;
    readonly proxy: { readonly rssBefore: number; readonly rssPeak: number };
    readonly provider: { readonly rssBefore: number; readonly rssPeak: number };
  };
}

/** A process's current and peak RSS from /proc (bytes). */
function procMemory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
  return { rss: field("VmRSS"), peak: field("VmHWM") };
}

/** The shape of a tree: `files` empty files, `perDirectory` to a directory, the directories `perGroup` to a parent (0: at the root). */
interface TreeShape {
  readonly files: number;
  readonly perDirectory: number;
  readonly perGroup: number;
}
/** Files: 1,000 to a directory at the root. Directories: 5 files to a directory, 100 directories to a parent (a checkout's shape). */
const FILES_HEAVY = (files: number): TreeShape => ({ files, perDirectory: 1000, perGroup: 0 });
const DIRECTORIES_HEAVY = (files: number): TreeShape => ({ files, perDirectory: 5, perGroup: 100 });
const directoriesOf = (shape: TreeShape) => Math.ceil(shape.files / shape.perDirectory) + (shape.perGroup ? Math.ceil(shape.files / shape.perDirectory / shape.perGroup) : 0);
const describeShape = (shape: TreeShape) => (shape.perGroup ? `${shape.files} files in ${directoriesOf(shape)} directories` : `${shape.files} files`);

function makeTree(shape: TreeShape): string {
  const root = mkdtempSync(join(tmpdir(), "diverge-bench-snapshot-"));
  for (let d = 0; d * shape.perDirectory < shape.files; d++) {
    const parent = shape.perGroup ? join(root, `g${Math.floor(d / shape.perGroup)}`) : root;
    if (shape.perGroup && d % shape.perGroup === 0) mkdirSync(parent);
    const dir = join(parent, `d${d}`);
    mkdirSync(dir);
    for (let f = 0; f < shape.perDirectory && d * shape.perDirectory + f < shape.files; f++) writeFileSync(join(dir, `file-${f}.txt`), "");
  }
  return root;
}

/** The first message of a tree on `transport`, with a sampled heap peak of the proxy meanwhile. */
async function firstTreeMessage(proxy: Child, transport: "paths" | "multiplexed"): Promise<{ bytes: number; heapPeak: number; samples: number }> {
  const heapOf = (m: { heapUsed: number; external: number }) => m.heapUsed + m.external;
  let heapPeak = 0;
  let samples = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      heapPeak = Math.max(heapPeak, heapOf(await proxy.memory(false)));
      samples++;
      await sleep(20);
    }
  })();
  try {
    if (transport === "multiplexed") {
      const connection = await openContainer(`ws://127.0.0.1:${proxy.ready.port}/`);
      try {
        const tree = connection.tree();
        for await (const frame of tree) {
          // The client decodes it; its size on the wire is the frame's encoding behind the response tag.
          return { bytes: 1 + encodeFiletreeFrame(frame).length, heapPeak, samples };
        }
        throw new Error("the tree ended before its Snapshot");
      } finally {
        connection.close();
      }
    }
    const socket = new WebSocket(`ws://127.0.0.1:${proxy.ready.port}/filesystem/tree`);
    const first = new Promise<Buffer>((resolve, reject) => {
      socket.once("message", (data: Buffer) => resolve(data));
      socket.once("error", reject);
      socket.once("close", () => reject(new Error("the tree closed before its Snapshot")));
    });
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("error", reject);
    });
    socket.send(encodeFilesystemPathsRequest({ request: { ignore: [] } }));
    const timer = setTimeout(() => socket.terminate(), 120_000);
    const message = await first.finally(() => clearTimeout(timer));
    socket.close();
    return { bytes: message.length, heapPeak, samples };
  } finally {
    sampling = false;
    await sampler;
  }
}

async function snapshotPeak(root: string, shape: TreeShape, transport: "paths" | "multiplexed"): Promise<SnapshotMemory> {
  let proxy: Child | undefined;
  try {
    proxy = await startChild(["filesystem", root]);
    await sleep(500);
    const before = await proxy.memory();
    const heapOf = (m: { heapUsed: number; external: number }) => m.heapUsed + m.external;
    const first = await firstTreeMessage(proxy, transport);
    const after = await proxy.memory();
    return {
      tree: describeShape(shape),
      files: shape.files,
      transport,
      messageBytes: first.bytes,
      rssBefore: before.rss,
      rssPeak: Math.max(after.maxRss ?? NaN, before.rss),
      heapBefore: heapOf(before),
      heapPeak: Math.max(first.heapPeak, heapOf(before)),
      heapAfter: heapOf(after),
      samples: first.samples,
    };
  } finally {
    await proxy?.close();
  }
}

/**
 * What any Node program pays to walk the same tree, in a fresh process: readdir each directory and
 * lstat every entry, 32 at a time (the proxy's concurrency), keeping nothing. Its peak is mostly V8
 * growing its young generation under the allocation rate of that many async calls, whatever is kept.
 */
async function bareWalkPeak(root: string): Promise<{ rssBefore: number; rssPeak: number }> {
  const script = `
    const { lstat, readdir } = require("node:fs/promises");
    const { readFileSync } = require("node:fs");
    const hwm = () => Number(/VmHWM:\\s+(\\d+)/.exec(readFileSync("/proc/self/status", "utf8"))[1]) * 1024;
    (async () => {
      const root = process.argv[1];
      await lstat(root);
      await new Promise((r) => setTimeout(r, 500));
      const rssBefore = process.memoryUsage().rss;
      const walk = async (dir) => {
        const names = await readdir(dir);
        const kinds = [];
        let next = 0;
        await Promise.all(Array.from({ length: 32 }, async () => {
          while (next < names.length) { const i = next++; kinds[i] = (await lstat(dir + "/" + names[i])).isDirectory(); }
        }));
        for (let i = 0; i < names.length; i++) if (kinds[i]) await walk(dir + "/" + names[i]);
      };
      await walk(root);
      process.stdout.write(JSON.stringify({ rssBefore, rssPeak: hwm() }));
    })();`;
  const child = spawn(process.execPath, ["-e", script, root], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  await new Promise<void>((resolve, reject) => child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`the bare walk exited ${code}`)))));
  return JSON.parse(out) as { rssBefore: number; rssPeak: number };
}

/** The program reads `total` bytes of a command's answer, stopping for `pauseMs` after every `every` bytes. */
async function commandPeaks(total: number, every: number, pauseMs: number): Promise<FamiliesMemory["command"]> {
  const dir = mkdtempSync(join(tmpdir(), "diverge-bench-command-"));
  const script = join(dir, "fast.sh");
  // Each command prints one long-ish line after another, as fast as the pipe takes them.
  writeFileSync(script, "#!/bin/sh\nexec yes 'a line of output, written far faster than the program reads it, 64 bytes'\n");
  chmodSync(script, 0o755);
  const container = await startChild(["container"]);
  const proxy = await startChild(["proxy", String(container.ready.port)]);
  const cli = join(dirname(createRequire(import.meta.url).resolve("@diverge/client/package.json")), "dist", "cli.js");
  const provider = spawn(process.execPath, [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.ready.port}`, "--transport", "paths", "--quiet", "--command-exec", script], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  provider.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  try {
    // Connected once the proxy counts a provider on /requests: ask until a command is answered.
    const started = Date.now();
    let answered = false;
    while (!answered) {
      if (Date.now() - started > 30_000 || provider.exitCode !== null) throw new Error(`the provider never answered a command: ${stderr}`);
      answered = await new Promise<boolean>((resolve) => {
        const req = request({ host: "127.0.0.1", port: proxy.ready.programPort, method: "POST", path: "/command" }, (res) => {
          res.once("data", () => {
            resolve(res.statusCode === 200);
            req.destroy();
          });
          res.once("error", () => resolve(false));
        });
        req.on("error", () => resolve(false));
        req.end("probe");
      });
      if (!answered) await sleep(200);
    }
    await sleep(500);
    const proxyBefore = await proxy.memory();
    const providerBefore = procMemory(provider.pid!);
    let read = 0;
    let pauses = 0;
    await new Promise<void>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: proxy.ready.programPort, method: "POST", path: "/command" }, (res) => {
        let nextPause = every;
        res.on("data", (chunk: Buffer) => {
          read += chunk.length;
          if (read >= total) {
            req.destroy();
            resolve();
          } else if (read >= nextPause) {
            nextPause += every;
            pauses++;
            res.pause();
            setTimeout(() => res.resume(), pauseMs);
          }
        });
        res.once("error", () => (read >= total ? resolve() : reject(new Error(`the answer broke after ${read} bytes`))));
        res.once("end", () => (read >= total ? resolve() : reject(new Error(`the answer ended after ${read} bytes`))));
      });
      req.on("error", (problem) => (read >= total ? resolve() : reject(problem)));
      req.setTimeout(120_000, () => req.destroy(new Error("the command read took more than 120 s")));
      req.end("go");
    });
    const proxyAfter = await proxy.memory();
    const providerAfter = procMemory(provider.pid!);
    return {
      bytesRead: read,
      pauses,
      proxy: { rssBefore: proxyBefore.rss, rssPeak: Math.max(proxyAfter.maxRss ?? NaN, proxyBefore.rss) },
      provider: { rssBefore: providerBefore.rss, rssPeak: providerAfter.peak },
    };
  } finally {
    provider.kill("SIGTERM");
    await new Promise((resolve) => (provider.exitCode !== null ? resolve(undefined) : provider.once("exit", resolve)));
    await proxy.close();
    await container.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function familiesMemory(quick: boolean, log: (line: string) => void): Promise<{ result: FamiliesMemory; targets: Target[]; rows: string[][] }> {
  // Files-heavy trees on both transports at two sizes (what grows with the tree, and what does not),
  // and a directories-heavy one (a checkout's shape: each directory costs an inotify watch).
  const shapes: { shape: TreeShape; transports: readonly ("paths" | "multiplexed")[] }[] = quick
    ? [{ shape: FILES_HEAVY(5_000), transports: ["paths", "multiplexed"] }]
    : [
        { shape: FILES_HEAVY(100_000), transports: ["paths", "multiplexed"] },
        { shape: FILES_HEAVY(200_000), transports: ["paths", "multiplexed"] },
        { shape: DIRECTORIES_HEAVY(100_000), transports: ["paths"] },
      ];
  const snapshots: SnapshotMemory[] = [];
  const bareWalks: FamiliesMemory["bareWalks"][number][] = [];
  for (const { shape, transports } of shapes) {
    const root = makeTree(shape);
    try {
      log(`  memory: a bare walk of ${describeShape(shape)}`);
      bareWalks.push({ tree: describeShape(shape), ...(await bareWalkPeak(root)) });
      for (const transport of transports) {
        log(`  memory: a tree Snapshot of ${describeShape(shape)} (${transport})`);
        snapshots.push(await snapshotPeak(root, shape, transport));
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }
  const total = quick ? 16 * MB : 256 * MB;
  const every = quick ? 4 * MB : 32 * MB;
  log(`  memory: a command's ${total / MB} MB answer read with pauses`);
  const command = await commandPeaks(total, every, 1000);
  const mb = (bytes: number) => `${(bytes / MB).toFixed(1)} MB`;
  const proxyGrowth = command.proxy.rssPeak - command.proxy.rssBefore;
  const providerGrowth = command.provider.rssPeak - command.provider.rssBefore;
  // The same allowance as the postgres stream (V8 grows its young generation once under this allocation rate).
  const commandLimit = 48 * MB;
  const targets: Target[] = snapshots.map((snapshot) => {
    const bare = bareWalks.find((b) => b.tree === snapshot.tree)!;
    const growth = snapshot.rssPeak - snapshot.rssBefore;
    const bareGrowth = bare.rssPeak - bare.rssBefore;
    const beyond = growth - bareGrowth;
    return {
      case: 5,
      what: `tree Snapshot of ${snapshot.tree} (${snapshot.transport === "paths" ? "/filesystem/tree" : "filesystem::tree"})`,
      goal: "proxy peak RSS growth within a bare Node walk's of the same tree plus a few times (4×) the Snapshot's size",
      value:
        `RSS +${mb(growth)} at the kernel's peak for a ${mb(snapshot.messageBytes)} Snapshot (${(growth / snapshot.messageBytes).toFixed(1)}× alone); a bare walk +${mb(bareGrowth)}, so ` +
        `${beyond <= 0 ? "nothing" : `+${mb(beyond)} (${(beyond / snapshot.messageBytes).toFixed(1)}×)`} beyond it; heap +${mb(snapshot.heapPeak - snapshot.heapBefore)} at the sampled peak, +${mb(snapshot.heapAfter - snapshot.heapBefore)} kept by the watch after a GC`,
      met: beyond <= 4 * snapshot.messageBytes,
    };
  });
  targets.push({
    case: 5,
    what: `a command writing faster than the program reads (${mb(command.bytesRead)} read, ${command.pauses} pauses of 1 s)`,
    goal: `proxy and provider peak RSS each within ${commandLimit / MB} MB of where they started`,
    value: `proxy +${mb(proxyGrowth)}, provider (diverge connect) +${mb(providerGrowth)} at the peak`,
    met: proxyGrowth <= commandLimit && providerGrowth <= commandLimit,
  });
  const rows = [
    ...bareWalks.map((bare) => [`a bare Node walk of ${bare.tree} (readdir, lstat 32 at a time, nothing kept)`, `RSS ${mb(bare.rssBefore)} before, peak ${mb(bare.rssPeak)} (VmHWM)`]),
    ...snapshots.map((snapshot) => [
      `tree Snapshot of ${snapshot.tree}, ${snapshot.transport} (${mb(snapshot.messageBytes)})`,
      `proxy heap+external ${mb(snapshot.heapBefore)} before, peak ${mb(snapshot.heapPeak)} (sampled), ${mb(snapshot.heapAfter)} after a GC; RSS ${mb(snapshot.rssBefore)} before, peak ${mb(snapshot.rssPeak)} (kernel maxRSS)`,
    ]),
    [
      `command answer of ${mb(command.bytesRead)} read with ${command.pauses} pauses`,
      `proxy RSS ${mb(command.proxy.rssBefore)} → peak ${mb(command.proxy.rssPeak)}; provider ${mb(command.provider.rssBefore)} → peak ${mb(command.provider.rssPeak)} (VmHWM)`,
    ],
  ];
  return { result: { snapshots, bareWalks, command }, targets, rows };
}
