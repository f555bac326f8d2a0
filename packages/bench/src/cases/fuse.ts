// Case 13: FUSE mounts with real programs (issue 25), side by side in one run on the same provider
// directory: the directory directly, sshfs over a loopback sshd (what a provider would use instead),
// `fuse::mount` (multiplexed) and `/fuse/mount` (paths). The proxy runs in a process of its own
// (child.ts `filesystem <root>`, one per transport), so its RSS is its alone; this process is the
// provider. Each workload is a real program in a child process:
//   - fio sequential write and read, 1 MiB blocks, and random read, 4 KiB blocks (page caches
//     dropped before each read when the machine lets us);
//   - small files: 1,000 files of 1 KiB in 10 directories created, `find`, `tar c`, `rm -r`;
//   - `git init`, `add`, `commit` of 1,000 files;
//   - `sqlite3` in WAL mode: 300 inserts, each its own transaction.
// Targets: multiplexed ≥ 1.0× sshfs on every row, paths ≥ 0.3× sshfs (files within its 16 MiB
// limit: the fio file is 12 MiB); the proxy's RSS reported beside. Only 127.0.0.1 is dialled.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectProxy, openContainer, PathsMounts, type MultiplexedConnection, type PathsConnection } from "@diverge/client";
import { fuseUnavailable } from "@diverge/server";
import { processCpuMicros, startChild, type Child } from "../processes.js";
import type { SuiteReport, Table, Target } from "../run.js";

const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Sizes {
  readonly fioBytes: number;
  readonly randBytes: number;
  readonly smallFiles: number;
  readonly gitFiles: number;
  readonly inserts: number;
  /**
   * Each workload is run this many times on every mount and the best kept: a fresh proxy and
   * provider compile their hot code over their first few thousand asks (~3 s on two cores, each ask
   * then costing about twice what it does later), which a single run would count against them.
   */
  readonly rounds: number;
  /** The two file sizes written and read through each mount while the proxy's RSS is sampled: [small, large]. */
  readonly rssFiles: Record<"multiplexed" | "paths", readonly [number, number]>;
}
const FULL: Sizes = { fioBytes: 12 * MiB, randBytes: 2 * MiB, smallFiles: 1000, gitFiles: 1000, inserts: 300, rounds: 2, rssFiles: { multiplexed: [16 * MiB, 256 * MiB], paths: [1 * MiB, 15 * MiB] } };
const QUICK: Sizes = { fioBytes: 1 * MiB, randBytes: 256 * 1024, smallFiles: 50, gitFiles: 50, inserts: 20, rounds: 1, rssFiles: { multiplexed: [1 * MiB, 8 * MiB], paths: [256 * 1024, 2 * MiB] } };
/** "Flat": the large file may raise the proxy's RSS by at most this much more than the small one did. */
const RSS_FLAT_MARGIN = 32 * MiB;

type Where = "direct" | "sshfs" | "multiplexed" | "paths";
const LABEL: Record<Where, string> = {
  direct: "the directory directly",
  sshfs: "sshfs (loopback sshd)",
  multiplexed: "fuse::mount (multiplexed)",
  paths: "/fuse/mount (paths)",
};

/** One workload's outcome: a rate (MiB/s) or seconds; undefined with why when it did not run or failed. */
interface Measured {
  readonly value?: number;
  readonly unit: "MiB/s" | "s";
  readonly failed?: string;
  /**
   * CPU milliseconds (user + system) the serving side spent on the workload: `server` the FUSE
   * server (the proxy; sshfs), `backend` what answers it (the provider, this process; sshd and its
   * SFTP session). Per MiB moved for fio, per file for the file workloads, per insert for sqlite.
   */
  readonly cpu?: { readonly server: number; readonly backend: number; readonly per: string };
}
/** The processes serving a mount whose CPU a workload is charged: each reads its CPU in microseconds so far. */
interface CpuMeters {
  readonly server: () => number;
  readonly backend: () => number;
}
/** CPU microseconds of `pid` and every process below it (sshd's session and SFTP children), from /proc. */
function treeCpuMicros(pid: number): number {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  let total = 0;
  const walk = (p: number) => {
    total += processCpuMicros(p) ?? 0;
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return total;
}
/** The process whose command line names the mount point `at` (the sshfs daemon). */
function pidServing(at: string): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (cmd[0]?.endsWith("sshfs") && cmd.includes(at)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}
const ownCpuMicros = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
type Row = Record<string, Measured>;
export interface FuseBenchResult {
  readonly sizes: Sizes;
  readonly runs: Partial<Record<Where, { readonly rows?: Row; readonly skipped?: string; readonly proxyPeakRssMiB?: number; readonly rssBySize?: readonly RssBySize[] }>>;
}
/** One file written (dd, fsync) and read back (cat) through a mount: the proxy's RSS rise meanwhile. */
interface RssBySize {
  readonly bytes: number;
  readonly riseMiB?: number;
  readonly failed?: string;
}

const WORKLOADS = ["fio seq write 1 MiB", "fio seq read 1 MiB", "fio rand read 4 KiB", "small files (create, find, tar c, rm -r)", "git init+add+commit", "sqlite3 WAL inserts"] as const;

function run(command: string, args: readonly string[], cwd?: string, timeoutMs = 120_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(command, [...args], { cwd, timeout: timeoutMs, maxBuffer: 64 << 20, env: { ...process.env, LC_ALL: "C" } }, (error, stdout, stderr) =>
      resolve({
        code: error ? ((error as { code?: number }).code ?? 1) : 0,
        stdout,
        // A kill at the timeout says so (execFile gives no exit code then); a tool that is not
        // installed (ENOENT, no output at all) says so too, so that its row reads as failed, not as empty.
        stderr: error && (error as { killed?: boolean }).killed ? `timed out after ${timeoutMs / 1000} s` : stderr || (error ? error.message : ""),
      }),
    ),
  );
}
/**
 * A shell script, in `cwd` by its own `cd`: never as the child's working directory, which the
 * child enters while this process waits for it to start (a mount this process serves would wait on itself).
 */
const sh = (script: string, cwd?: string) => run("sh", ["-c", cwd ? `cd '${cwd}' && ${script}` : script]);

async function dropCaches(): Promise<void> {
  await run("sync", []);
  await writeFile("/proc/sys/vm/drop_caches", "3").catch(() => undefined);
}

async function fio(dir: string, rw: "write" | "read" | "randread", bs: string, bytes: number, ioBytes?: number): Promise<Measured> {
  if (rw !== "write") await dropCaches();
  const args = ["--name=bench", `--filename=${join(dir, "fio.bin")}`, `--rw=${rw}`, `--bs=${bs}`, `--size=${bytes}`, "--ioengine=psync", "--output-format=json"];
  if (rw === "write") args.push("--end_fsync=1", "--create_on_open=1");
  if (ioBytes) args.push(`--io_size=${ioBytes}`);
  const r = await run("fio", args);
  if (r.code !== 0) return { unit: "MiB/s", failed: (r.stderr || r.stdout).trim().split("\n").slice(-2).join(" ") };
  const job = JSON.parse(r.stdout.slice(r.stdout.indexOf("{"))).jobs[0];
  const side = rw === "write" ? job.write : job.read;
  return { value: side.bw_bytes / MiB, unit: "MiB/s" };
}

async function timed(script: string, cwd: string): Promise<Measured> {
  const start = performance.now();
  const r = await sh(script, cwd);
  const seconds = (performance.now() - start) / 1000;
  if (r.code !== 0) return { unit: "s", failed: r.stderr.trim().split("\n").slice(-2).join(" ") || `exit ${r.code}` };
  return { value: seconds, unit: "s" };
}

async function workloads(dir: string, sizes: Sizes, gitSource: string, log: (line: string) => void, sample: () => Promise<void>, meters?: CpuMeters): Promise<Row> {
  const row: Row = {};
  const ops: Record<(typeof WORKLOADS)[number], [number, string]> = {
    "fio seq write 1 MiB": [sizes.fioBytes / MiB, "MiB"],
    "fio seq read 1 MiB": [sizes.fioBytes / MiB, "MiB"],
    "fio rand read 4 KiB": [sizes.randBytes / MiB, "MiB"],
    "small files (create, find, tar c, rm -r)": [sizes.smallFiles, "file"],
    "git init+add+commit": [sizes.gitFiles, "file"],
    "sqlite3 WAL inserts": [sizes.inserts, "insert"],
  };
  /** Keeps the better of two measurements (a rate: the higher; seconds: the lower). */
  const better = (a: Measured, b: Measured) => (a.unit === "MiB/s" ? a.value! > b.value! : a.value! < b.value!);
  const step = async (name: (typeof WORKLOADS)[number], measure: () => Promise<Measured>, around: { readonly before?: () => Promise<unknown>; readonly after?: () => Promise<unknown> } = {}) => {
    const [count, per] = ops[name];
    let best: Measured | undefined;
    for (let round = 0; round < sizes.rounds; round++) {
      await around.before?.();
      const before = meters && { server: meters.server(), backend: meters.backend() };
      const measured = await measure();
      const entry: Measured = before && !measured.failed ? { ...measured, cpu: { server: (meters!.server() - before.server) / 1000 / count, backend: (meters!.backend() - before.backend) / 1000 / count, per } } : measured;
      await around.after?.();
      if (measured.failed) {
        best = entry;
        break;
      }
      if (!best || better(entry, best)) best = entry;
    }
    row[name] = best!;
    await sample();
    const cpu = row[name]!.cpu;
    log(`    ${name}: ${row[name]!.failed ? `failed: ${row[name]!.failed}` : `${row[name]!.value!.toFixed(2)} ${row[name]!.unit}`}${cpu ? ` (CPU per ${cpu.per}: server ${cpu.server.toFixed(2)} ms, backend ${cpu.backend.toFixed(2)} ms)` : ""}`);
  };
  await step("fio seq write 1 MiB", () => fio(dir, "write", "1M", sizes.fioBytes));
  await step("fio seq read 1 MiB", () => fio(dir, "read", "1M", sizes.fioBytes));
  await step("fio rand read 4 KiB", () => fio(dir, "randread", "4k", sizes.fioBytes, sizes.randBytes));
  // Never this process's own fs calls on a mount it serves (its thread pool would wait on itself): a child's.
  await sh("rm -f fio.bin", dir);
  const perDir = Math.ceil(sizes.smallFiles / 10);
  await step("small files (create, find, tar c, rm -r)", () =>
    timed(
      `python3 -c "import os\nfor d in range(10):\n  os.makedirs('small/d%d' % d)\n  for i in range(${perDir}):\n    open('small/d%d/f%d' % (d, i), 'wb').write(b'x' * 1024)\n" && find small > /dev/null && tar cf /dev/null small && rm -r small`,
      dir,
    ),
  );
  await step("git init+add+commit", () => timed("cd repo && git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm one", dir), {
    before: () => sh(`cp -r ${gitSource} repo`, dir),
    after: () => sh("rm -rf repo", dir),
  });
  const sql = join(tmpdir(), `diverge-fuse-bench-${process.pid}.sql`);
  await writeFile(sql, Array.from({ length: sizes.inserts }, (_, i) => `INSERT INTO t VALUES(${i}, '${"v".repeat(100)}');`).join("\n"));
  await step("sqlite3 WAL inserts", () => timed(`sqlite3 db.sqlite 'PRAGMA journal_mode=WAL;' 'CREATE TABLE t(a INTEGER, b TEXT);' > /dev/null && sqlite3 db.sqlite < ${sql}`, dir), {
    after: () => sh("rm -f db.sqlite db.sqlite-wal db.sqlite-shm", dir),
  });
  return row;
}

/** Writes a file of `bytes` (dd, fsync) through the mount at `dir` and reads it back (cat), sampling the proxy's RSS every 50 ms. */
async function rssWhileMoving(proxy: Child, dir: string, bytes: number): Promise<RssBySize> {
  const before = (await proxy.memory()).rss;
  let peak = before;
  let done = false;
  const sampler = (async () => {
    while (!done) {
      peak = Math.max(peak, (await proxy.memory(false)).rss);
      await sleep(50);
    }
  })();
  // 64 KiB writes (a program's usual buffer), the last one short: the file is `bytes` long.
  const r = await sh(`head -c ${bytes} /dev/zero | dd of=rss.bin bs=65536 iflag=fullblock conv=fsync status=none && cat rss.bin > /dev/null && rm rss.bin`, dir);
  done = true;
  await sampler;
  if (r.code !== 0) return { bytes, failed: r.stderr.trim().split("\n").slice(-1)[0] || `exit ${r.code}` };
  return { bytes, riseMiB: Math.max(0, peak - before) / MiB };
}

/** A loopback sshd serving this machine's root over SFTP, and sshfs of `dir` at `at`; undefined with why when they are missing. */
async function startSshfs(base: string, dir: string, at: string): Promise<{ close(): Promise<void>; meters: CpuMeters } | string> {
  for (const tool of ["/usr/sbin/sshd", "/usr/bin/sshfs", "/usr/bin/ssh-keygen"]) if (!existsSync(tool)) return `not measured: ${tool} is missing (Debian's openssh-server and sshfs)`;
  const ssh = join(base, "ssh");
  await mkdir(ssh, { mode: 0o700 });
  for (const key of ["host", "user"]) {
    const r = await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(ssh, key)]);
    if (r.code !== 0) return `not measured: ssh-keygen failed: ${r.stderr.trim()}`;
  }
  await writeFile(join(ssh, "authorized_keys"), await readFile(join(ssh, "user.pub")));
  await chmod(join(ssh, "authorized_keys"), 0o600);
  const port = 20000 + (process.pid % 20000);
  await writeFile(
    join(ssh, "sshd_config"),
    [`Port ${port}`, "ListenAddress 127.0.0.1", `HostKey ${join(ssh, "host")}`, `AuthorizedKeysFile ${join(ssh, "authorized_keys")}`, "PermitRootLogin yes", "PasswordAuthentication no", "UsePAM no", "StrictModes no", `PidFile ${join(ssh, "pid")}`, "Subsystem sftp internal-sftp"].join("\n") + "\n",
  );
  await mkdir("/run/sshd", { recursive: true }).catch(() => undefined);
  const sshd: ChildProcess = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(ssh, "sshd_config")], { stdio: ["ignore", "ignore", "pipe"] });
  let sshdErr = "";
  sshd.stderr?.on("data", (d: Buffer) => (sshdErr += d.toString()));
  const stopSshd = async () => {
    if (sshd.exitCode === null) {
      sshd.kill("SIGTERM");
      await new Promise((r) => sshd.once("exit", r));
    }
  };
  for (let i = 0; i < 50 && !sshdErr.includes("listening"); i++) await sleep(100);
  if (sshd.exitCode !== null) return `not measured: sshd did not start: ${sshdErr.trim().split("\n").pop()}`;
  await mkdir(at);
  const opts = `IdentityFile=${join(ssh, "user")},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,port=${port},LogLevel=ERROR`;
  const mounted = await run("sshfs", ["-o", opts, `root@127.0.0.1:${dir}`, at]);
  if (mounted.code !== 0) {
    await stopSshd();
    return `not measured: sshfs failed: ${mounted.stderr.trim()}`;
  }
  const sshfsPid = pidServing(at);
  return {
    meters: { server: () => (sshfsPid === undefined ? NaN : (processCpuMicros(sshfsPid) ?? NaN)), backend: () => treeCpuMicros(sshd.pid!) },
    async close() {
      await run("fusermount", ["-u", at]).then((r) => (r.code === 0 ? r : run("umount", ["-l", at])));
      await stopSshd();
    },
  };
}

export async function fuseSuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const sizes = quick ? QUICK : FULL;
  const unavailable = fuseUnavailable();
  if (unavailable) {
    const why = `not measured: FUSE is not available here (${unavailable})`;
    log(`  fuse: ${why}`);
    return { result: { sizes, runs: {}, skipped: why }, tables: [], targets: [{ case: 12, what: "FUSE mounts with real programs", goal: "multiplexed ≥ 1.0× sshfs, paths ≥ 0.3× sshfs", value: why, met: null }] };
  }
  const base = await realpath(await mkdtemp(join(tmpdir(), "diverge-bench-fuse-")));
  const provider = join(base, "provider");
  const gitSource = join(base, "git-source");
  await mkdir(provider);
  await sh(`python3 -c "import os\nfor i in range(${sizes.gitFiles}):\n  d = '${gitSource}/d%d' % (i % 20)\n  os.makedirs(d, exist_ok=True)\n  open('%s/f%d.txt' % (d, i), 'w').write(('line %d\\\\n' % i) * 40)\n"`);
  const runs: FuseBenchResult["runs"] = {};
  try {
    log("  fuse: the directory directly");
    runs.direct = { rows: await workloads(provider, sizes, gitSource, log, async () => {}) };

    log("  fuse: sshfs over a loopback sshd");
    const sshfsAt = join(base, "sshfs");
    const sshfs = await startSshfs(base, provider, sshfsAt);
    if (typeof sshfs === "string") {
      log(`    ${sshfs}`);
      runs.sshfs = { skipped: sshfs };
    } else {
      try {
        runs.sshfs = { rows: await workloads(sshfsAt, sizes, gitSource, log, async () => {}, sshfs.meters) };
      } finally {
        await sshfs.close();
      }
    }

    for (const transport of ["multiplexed", "paths"] as const) {
      log(`  fuse: ${LABEL[transport]}`);
      const root = join(base, `root-${transport}`);
      await mkdir(root);
      let proxy: Child | undefined;
      let container: MultiplexedConnection | undefined;
      let answering: PathsConnection | undefined;
      try {
        proxy = await startChild(["filesystem", root]);
        const url = `ws://127.0.0.1:${proxy.ready.port}`;
        if (transport === "multiplexed") {
          container = await openContainer(`${url}/`);
          await container.mount(["m"], provider);
        } else {
          const mounts = new PathsMounts(url);
          answering = connectProxy(url, { ...mounts.handlers() });
          await answering.whenConnected({ timeoutMs: 10_000 });
          await mounts.mount(["m"], provider);
        }
        let peak = (await proxy.memory(false)).rss;
        const sample = async () => {
          peak = Math.max(peak, (await proxy!.memory(false)).rss);
        };
        const proxyPid = proxy.pid;
        const rows = await workloads(join(root, "m"), sizes, gitSource, log, sample, { server: () => processCpuMicros(proxyPid) ?? NaN, backend: ownCpuMicros });
        const rssBySize: RssBySize[] = [];
        for (const bytes of sizes.rssFiles[transport]) {
          const one = await rssWhileMoving(proxy, join(root, "m"), bytes);
          rssBySize.push(one);
          log(`    proxy RSS, a ${bytes / MiB} MiB file written and read: ${one.failed ? `failed: ${one.failed}` : `+${one.riseMiB!.toFixed(1)} MiB`}`);
        }
        runs[transport] = { rows, proxyPeakRssMiB: peak / MiB, rssBySize };
      } finally {
        await container?.close();
        await answering?.close();
        await proxy?.close();
      }
    }
  } finally {
    await rm(base, { recursive: true, force: true }).catch((problem: unknown) => log(`  fuse: could not remove ${base}: ${(problem as Error).message}`));
  }
  const result: FuseBenchResult = { sizes, runs };
  return { result, tables: tablesOf(result), targets: targetsOf(result) };
}

const show = (m: Measured | undefined) => (!m ? "—" : m.failed ? `failed (${m.failed.slice(0, 80)})` : `${m.value!.toFixed(m.unit === "s" ? 2 : 1)} ${m.unit}`);

/** How many times as good as `than` (a rate: higher is better; seconds: lower is better). */
function ratio(m: Measured | undefined, than: Measured | undefined): number | undefined {
  if (!m || !than || m.value === undefined || than.value === undefined || m.value <= 0 || than.value <= 0) return undefined;
  return m.unit === "MiB/s" ? m.value / than.value : than.value / m.value;
}

function tablesOf(r: FuseBenchResult): Table[] {
  const order: Where[] = ["direct", "sshfs", "multiplexed", "paths"];
  const columns = ["workload", ...order.map((w) => LABEL[w]), "multiplexed ÷ sshfs", "paths ÷ sshfs"];
  const rows = WORKLOADS.map((name) => {
    const cell = (w: Where) => (r.runs[w]?.skipped ? "not measured" : show(r.runs[w]?.rows?.[name]));
    const sshfs = r.runs.sshfs?.rows?.[name];
    const x = (w: Where) => {
      const v = ratio(r.runs[w]?.rows?.[name], sshfs);
      return v === undefined ? "—" : `${v.toFixed(2)}×`;
    };
    return [name, ...order.map(cell), x("multiplexed"), x("paths")];
  });
  rows.push(["proxy peak RSS", "—", "—", r.runs.multiplexed?.proxyPeakRssMiB ? `${r.runs.multiplexed.proxyPeakRssMiB.toFixed(0)} MiB` : "—", r.runs.paths?.proxyPeakRssMiB ? `${r.runs.paths.proxyPeakRssMiB.toFixed(0)} MiB` : "—", "", ""]);
  const notes = [
    `fio on a ${r.sizes.fioBytes / MiB} MiB file (within the paths transport's 16 MiB whole-file limit), psync, the write with end_fsync; random read of ${r.sizes.randBytes / MiB} MiB; page caches dropped before each read.`,
    `small files: ${r.sizes.smallFiles} files of 1 KiB in 10 directories; git: ${r.sizes.gitFiles} files of ~400 bytes in 20 directories; sqlite3: ${r.sizes.inserts} inserts in WAL mode, each its own transaction.`,
    `Rates in MiB/s (higher is better), times in seconds (lower is better); ratios are how many times as good as sshfs. The mounts use the default cache level (close-to-open). Each workload ran ${r.sizes.rounds} time${r.sizes.rounds === 1 ? "" : "s"} on every mount, the best kept.`,
  ];
  if (r.runs.sshfs?.skipped) notes.push(`sshfs ${r.runs.sshfs.skipped}`);
  const served: Where[] = ["sshfs", "multiplexed", "paths"];
  const cpuCell = (w: Where, name: (typeof WORKLOADS)[number]) => {
    const cpu = r.runs[w]?.rows?.[name]?.cpu;
    return cpu && Number.isFinite(cpu.server) ? `${cpu.server.toFixed(2)} / ${cpu.backend.toFixed(2)}` : "—";
  };
  const cpuRows = WORKLOADS.map((name) => [name, ...served.map((w) => cpuCell(w, name)), r.runs.multiplexed?.rows?.[name]?.cpu?.per ?? r.runs.sshfs?.rows?.[name]?.cpu?.per ?? "—"]);
  const cpuTable: Table = {
    title: "Case 13: CPU per operation of the processes serving each mount",
    columns: ["workload", ...served.map((w) => `${LABEL[w]}: server / backend ms`), "per"],
    rows: cpuRows,
    notes: [
      "CPU milliseconds (user + system) per MiB moved, per file, or per insert, spent during the workload by the FUSE server (sshfs; the proxy) and what answers it (sshd with its SFTP session; the provider, which is the bench's own process, so its figure includes the bench's own bookkeeping).",
    ],
  };
  return [{ title: "Case 13: FUSE mounts with real programs, against sshfs and the directory itself", columns, rows, notes }, cpuTable];
}

function targetsOf(r: FuseBenchResult): Target[] {
  const targets: Target[] = [];
  for (const [transport, goal] of [["multiplexed", 1.0], ["paths", 0.3]] as const) {
    for (const name of WORKLOADS) {
      const m = r.runs[transport]?.rows?.[name];
      const s = r.runs.sshfs?.rows?.[name];
      const v = ratio(m, s);
      targets.push({
        case: 13,
        what: `${LABEL[transport]}: ${name}`,
        goal: `≥ ${goal.toFixed(1)}× sshfs`,
        value: v === undefined ? (r.runs.sshfs?.skipped ?? (m?.failed ? `failed: ${m.failed}` : "not measured")) : `${v.toFixed(2)}× (${show(m)} vs ${show(s)})`,
        met: v === undefined ? (m?.failed ? false : null) : v >= goal,
      });
    }
  }
  for (const transport of ["multiplexed", "paths"] as const) {
    const peak = r.runs[transport]?.proxyPeakRssMiB;
    if (peak !== undefined) targets.push({ case: 13, what: `${LABEL[transport]}: proxy peak RSS`, goal: "reported", value: `${peak.toFixed(0)} MiB`, met: null });
    const [small, large] = r.runs[transport]?.rssBySize ?? [];
    if (small && large) {
      const fmt = (m: RssBySize) => `${(m.bytes / MiB).toFixed(m.bytes < MiB ? 2 : 0)} MiB file: ${m.failed ? `failed (${m.failed})` : `+${m.riseMiB!.toFixed(1)} MiB`}`;
      const measured = small.riseMiB !== undefined && large.riseMiB !== undefined;
      targets.push({
        case: 13,
        what: `${LABEL[transport]}: proxy RSS whatever the file size (a file written with dd and read back)`,
        goal: `flat: the large file's rise ≤ the small one's + ${RSS_FLAT_MARGIN / MiB} MiB`,
        value: `${fmt(small)}; ${fmt(large)}`,
        met: measured ? large.riseMiB! <= small.riseMiB! + RSS_FLAT_MARGIN / MiB : false,
      });
    }
  }
  return targets;
}
