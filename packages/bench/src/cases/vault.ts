// Case 9: vault and command through the proxy (issue 15 §5), over loopback.
//   vault get: the program's `GET /vault/<key>` → proxy → /requests kind 5 → `diverge answer
//   --vault-database-url` (a separate process) → PostgreSQL, against the same `SELECT` made directly
//   with `pg` (a pool of the size the vault's own pool has); p50 at N = 1, throughput at N = 32.
//   command: `POST /command` → proxy → /requests kind 10 → `diverge answer --command-exec` running a
//   real executable that writes many lines, one item each, against reading that executable's stdout
//   directly (line by line, as the provider reads it).
// The program's HTTP client is `node:http` with a keep-alive agent: `fetch` (undici) costs the caller
// ~0.5 ms of CPU per request here, ~5× `node:http`, and with every process on two cores that cost
// would be most of what the row measures. The floor row (x) is that client against a plain Node HTTP
// server answering the same bytes: what any vault behind an HTTP API can reach on this machine.
// Beside each row, the CPU per get of the proxy and the provider (and of the caller, this process).
// PostgreSQL is a throwaway cluster (initdb in a temp dir, as the tests do); without PostgreSQL's
// binaries it is an embedded PGlite behind a PostgreSQL socket, and the table says so.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { Agent, request as httpRequest } from "node:http";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import pg from "pg";
import { load, processCpuMicros, profileArgs, startChild, type LoadResult } from "../processes.js";
import type { SuiteReport } from "../run.js";

const cli = join(dirname(createRequire(import.meta.url).resolve("@diverge/client/package.json")), "dist", "cli.js");

interface Database {
  readonly url: string;
  /** What serves it, for the table. */
  readonly what: string;
  stop(): Promise<void>;
}

export function postgresBin(): string | undefined {
  const fromEnv = process.env.DIVERGE_PG_BIN;
  if (fromEnv) return fromEnv;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const version of versions) if (existsSync(join(root, version, "bin", "initdb"))) return join(root, version, "bin");
  return undefined;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A throwaway PostgreSQL cluster (as root it runs as `postgres`, which refuses root), or PGlite when there is none. */
export async function startDatabase(): Promise<Database> {
  const bin = postgresBin();
  if (!bin) {
    const { PGlite } = await import("@electric-sql/pglite");
    const { PGLiteSocketServer } = await import("@electric-sql/pglite-socket");
    const db = await PGlite.create();
    const server = new PGLiteSocketServer({ db, port: 0, host: "127.0.0.1" });
    await server.start();
    const port = Number(server.getServerConn().split(":").pop());
    return {
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      what: "embedded PGlite behind a socket (no PostgreSQL binaries here)",
      stop: async () => {
        await server.stop();
        await db.close();
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), "diverge-bench-pg-"));
  const data = join(dir, "data");
  let ids: { uid: number; gid: number } | undefined;
  if (process.getuid?.() === 0) {
    ids = { uid: Number(spawnSync("id", ["-u", "postgres"], { encoding: "utf8" }).stdout.trim()), gid: Number(spawnSync("id", ["-g", "postgres"], { encoding: "utf8" }).stdout.trim()) };
    chownSync(dir, ids.uid, ids.gid);
    chmodSync(dir, 0o700);
  }
  const init = spawnSync(join(bin, "initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"], { ...(ids ?? {}), encoding: "utf8" });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  const server: ChildProcess = spawn(join(bin, "postgres"), ["-D", data, "-p", String(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=60"], {
    ...(ids ?? {}),
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  server.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const stop = async () => {
    if (server.exitCode === null) {
      const exited = new Promise((resolve) => server.once("exit", resolve));
      server.kill("SIGINT");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.end();
      break;
    } catch {
      await client.end().catch(() => {});
      if (server.exitCode !== null || Date.now() > deadline) {
        await stop();
        throw new Error(`PostgreSQL did not start: ${stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const version = spawnSync(join(bin, "postgres"), ["--version"], { encoding: "utf8" }).stdout.trim();
  return { url, what: `${version}, a throwaway cluster on loopback (fsync off)`, stop };
}

/** `diverge answer` for the proxy at `proxyPort`; resolves once its /requests is open. */
async function answer(args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...profileArgs("provider"), cli, "answer", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  const collect = (chunk: Buffer) => (stderr += chunk.toString());
  child.stderr!.on("data", collect);
  const deadline = Date.now() + 30_000;
  while (!stderr.includes("connected to")) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`diverge answer did not connect: ${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  // It says a line per ask from now on: read and dropped, so it never blocks on a full pipe.
  child.stderr!.off("data", collect);
  child.stderr!.on("data", () => {});
  return child;
}

/** `GET url` with `agent` (keep-alive): the status and the body as text. */
function httpGet(agent: Agent, url: URL): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const ask = httpRequest(url, { agent }, (response) => {
      const parts: Buffer[] = [];
      response.on("data", (part: Buffer) => parts.push(part));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(parts).toString() }));
      response.on("error", reject);
    });
    ask.on("error", reject);
    ask.end();
  });
}

/** A plain Node HTTP server in a process of its own answering every request with `value`: the floor under the vault's HTTP API. */
async function plainHttpServer(value: string): Promise<{ port: number; pid: number; close(): void }> {
  const code = `const value = Buffer.from(${JSON.stringify(value)});
const server = require("node:http").createServer((request, response) => { request.resume(); response.writeHead(200, { "content-type": "application/octet-stream", "content-length": value.length }).end(value); });
server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\\n"));`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once("exit", (status) => reject(new Error(`the plain HTTP server exited with ${status}`)));
    child.stdout!.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
  });
  return { port, pid: child.pid!, close: () => void child.kill() };
}

/** CPU in µs per call of the processes in `pids` (undefined entries: none), over `run`. */
async function cpuPerCall(pids: readonly (number | undefined)[], run: () => Promise<LoadResult>): Promise<{ result: LoadResult; cpu: (number | undefined)[] }> {
  const before = pids.map((pid) => (pid === undefined ? undefined : processCpuMicros(pid)));
  const callerBefore = process.cpuUsage();
  const result = await run();
  const caller = process.cpuUsage(callerBefore);
  const cpu = pids.map((pid, i) => {
    const after = pid === undefined ? undefined : processCpuMicros(pid);
    return after === undefined || before[i] === undefined ? undefined : (after - before[i]!) / result.calls;
  });
  return { result, cpu: [...cpu, (caller.user + caller.system) / result.calls] };
}

/** Items/s of one run: `run` resolves with the number of items it read. */
async function itemsPerSecond(run: () => Promise<number>, expected: number): Promise<{ items: number; seconds: number; rate: number }> {
  const start = performance.now();
  const items = await run();
  const seconds = (performance.now() - start) / 1000;
  if (items !== expected) throw new Error(`read ${items} items, expected ${expected}`);
  return { items, seconds, rate: items / seconds };
}

export async function vaultSuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const seconds = quick ? 0.3 : 4;
  const maxCalls = quick ? 300 : 500_000;
  const lines = quick ? 2_000 : 200_000;
  const rounds = quick ? 1 : 5;
  const closers: (() => Promise<unknown> | unknown)[] = [];
  try {
    const database = await startDatabase();
    closers.unshift(() => database.stop());
    // A real executable that writes many lines, one item each.
    const scriptDir = mkdtempSync(join(tmpdir(), "diverge-bench-command-"));
    closers.unshift(() => rmSync(scriptDir, { recursive: true, force: true }));
    const executable = join(scriptDir, "lines.sh");
    writeFileSync(executable, `#!/bin/sh\nexec seq -f 'line %g of the command output' 1 ${lines}\n`);
    chmodSync(executable, 0o755);

    // The proxy in a process of its own (its app port is unused: no MCP here), and `diverge answer`.
    const proxy = await startChild(["proxy", "1"]);
    closers.unshift(() => proxy.close());
    const provider = await answer(["--proxy", `ws://127.0.0.1:${proxy.ready.port}`, "--vault-database-url", database.url, "--vault-namespace", "bench", "--command-exec", executable]);
    closers.unshift(
      () =>
        new Promise<void>((resolve) => {
          if (provider.exitCode !== null) return resolve();
          provider.once("exit", () => resolve());
          provider.kill("SIGINT");
        }),
    );
    const base = `http://127.0.0.1:${proxy.ready.programPort}`;
    const value = "a value of the bench's, 48 bytes long..........";
    const put = await fetch(`${base}/vault/bench-key`, { method: "PUT", body: value });
    if (put.status !== 204) throw new Error(`PUT /vault/bench-key answered ${put.status}: ${await put.text()}`);
    // A second proxy, its provider begun on the multiplexed connection (the vault on the begin scope).
    // (The begin needs the container's program: the example container.)
    const container = await startChild(["container"]);
    closers.unshift(() => container.close());
    const beginProxy = await startChild(["proxy", String(container.ready.port)]);
    closers.unshift(() => beginProxy.close());
    const beginProvider = await startChild(["vault-provider", String(beginProxy.ready.port), database.url, "bench"]);
    closers.unshift(() => beginProvider.close());
    const beginBase = `http://127.0.0.1:${beginProxy.ready.programPort}`;

    // The same SELECT the vault makes (its prepared statement), directly, on a pool the size of the vault's own.
    const pool = new pg.Pool({ connectionString: database.url, max: 8 });
    pool.on("error", () => {});
    closers.unshift(() => pool.end());
    const select = async () => {
      const { rows } = await pool.query({ name: "bench_vault_get", text: `SELECT value FROM diverge_vault WHERE namespace = $1 AND key = $2`, values: ["bench", Buffer.from("bench-key")] });
      if (rows.length !== 1) throw new Error("the direct SELECT found no value");
    };
    const floor = await plainHttpServer(value);
    closers.unshift(() => floor.close());
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    closers.unshift(() => agent.destroy());
    const getFrom = (url: URL, what: string) => async () => {
      const { status, text } = await httpGet(agent, url);
      if (status !== 200 || text !== value) throw new Error(`GET ${what} answered ${status}: ${text}`);
    };
    const get = getFrom(new URL(`${base}/vault/bench-key`), "/vault/bench-key");
    const getBegin = getFrom(new URL(`${beginBase}/vault/bench-key`), "/vault/bench-key (begin scope)");
    const getFloor = getFrom(new URL(`http://127.0.0.1:${floor.port}/vault/bench-key`), "the plain HTTP server");
    const calls = { direct: select, floor: getFloor, proxy: get, begin: getBegin } as const;
    // The processes each path crosses: [proxy, provider]; the caller's CPU comes last.
    const pids = { direct: [undefined, undefined], floor: [undefined, floor.pid], proxy: [proxy.pid, provider.pid], begin: [beginProxy.pid, beginProvider.pid] } as const;
    for (const call of Object.values(calls)) await load(call, 8, quick ? 0.05 : 0.5, quick ? 50 : 5_000);
    type Key = keyof typeof calls;
    const results: Record<Key, Record<string, LoadResult>> = { direct: {}, floor: {}, proxy: {}, begin: {} };
    const cpu: Record<Key, Record<string, (number | undefined)[]>> = { direct: {}, floor: {}, proxy: {}, begin: {} };
    for (const concurrency of [1, 32]) {
      for (const key of Object.keys(calls) as Key[]) {
        log(`  vault ${key} N=${concurrency}`);
        const measured = await cpuPerCall(pids[key], () => load(calls[key], concurrency, seconds, maxCalls));
        results[key][String(concurrency)] = measured.result;
        cpu[key][String(concurrency)] = measured.cpu;
      }
    }

    // Command: items per second, through the proxy and straight from the executable.
    const throughProxy = async () => {
      const response = await fetch(`${base}/command`, { method: "POST", body: "bench" });
      if (response.status !== 200 || !response.body) throw new Error(`POST /command answered ${response.status}`);
      let items = 0;
      let last = "";
      let rest = "";
      const decoder = new TextDecoder();
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        rest += decoder.decode(chunk, { stream: true });
        let at: number;
        while ((at = rest.indexOf("\n")) >= 0) {
          const line = rest.slice(0, at);
          rest = rest.slice(at + 1);
          if (line.startsWith('{"item"')) items++;
          else last = line;
        }
      }
      if (last !== '{"end":"done"}') throw new Error(`the command ended with ${last}`);
      return items;
    };
    const direct = async () => {
      const child = spawn(executable, [], { stdio: ["pipe", "pipe", "ignore"] });
      // The executable may exit without reading its stdin (as the proxy's --command-exec allows).
      child.stdin.on("error", () => {});
      child.stdin.end("bench");
      let items = 0;
      for await (const line of createInterface({ input: child.stdout, crlfDelay: Infinity })) if (line.length > 0) items++;
      await new Promise((resolve) => (child.exitCode !== null ? resolve(undefined) : child.once("close", resolve)));
      return items;
    };
    await itemsPerSecond(throughProxy, lines);
    await itemsPerSecond(direct, lines);
    const command: Record<"direct" | "proxy", { items: number; seconds: number; rate: number }[]> = { direct: [], proxy: [] };
    // CPU of the proxy and the provider over every run through them, per item.
    const commandCpu = [0, 0];
    for (let r = 0; r < rounds; r++) {
      log(`  command round ${r + 1} of ${rounds}`);
      command.direct.push(await itemsPerSecond(direct, lines));
      const before = [proxy.pid, provider.pid!].map(processCpuMicros);
      command.proxy.push(await itemsPerSecond(throughProxy, lines));
      [proxy.pid, provider.pid!].map(processCpuMicros).forEach((after, i) => (commandCpu[i]! += (after ?? NaN) - (before[i] ?? NaN)));
    }
    const commandCpuPerItem = commandCpu.map((micros) => micros / (rounds * lines));
    const best = (runs: { rate: number }[]) => Math.max(...runs.map((r) => r.rate));
    const commandRate = { direct: best(command.direct), proxy: best(command.proxy) };

    const r = (key: Key, n: number) => results[key][String(n)]!;
    const us = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? "—" : `${x.toFixed(0)} µs`);
    const cpuOf = (key: Key, n: number) => `CPU per get: proxy ${us(cpu[key][String(n)]![0])}, provider ${us(cpu[key][String(n)]![1])}`;
    const floorRatio = r("floor", 32).callsPerSecond / r("direct", 32).callsPerSecond;
    const beginRatio = r("begin", 32).callsPerSecond / r("direct", 32).callsPerSecond;
    const p50Ratio = r("proxy", 1).p50 / r("direct", 1).p50;
    const rateRatio = r("proxy", 32).callsPerSecond / r("direct", 32).callsPerSecond;
    const names = {
      direct: "(s) pg → PostgreSQL: the vault's SELECT, directly",
      floor: "(x) program → a plain Node HTTP server answering the same bytes (no vault)",
      proxy: "(t) program → proxy → /requests kind 5 → diverge answer → PostgreSQL",
      begin: "(w) program → proxy → begin scope → provider → PostgreSQL",
    } as const;
    return {
      result: { database: database.what, vault: results, vaultCpuPerGet: cpu, command: { lines, runs: command, cpuPerItem: { proxy: commandCpuPerItem[0], provider: commandCpuPerItem[1] } } },
      targets: [
        { case: 9, what: "vault get through the proxy vs the direct SELECT, p50 at N = 1", goal: "reported", value: `${p50Ratio.toFixed(2)}× the latency (${r("proxy", 1).p50.toFixed(2)} ms vs ${r("direct", 1).p50.toFixed(2)} ms)`, met: null },
        {
          case: 9,
          what: "vault get through the proxy vs the direct SELECT, throughput at N = 32",
          goal: "reported",
          value: `${rateRatio.toFixed(2)}× (${r("proxy", 32).callsPerSecond.toFixed(0)} vs ${r("direct", 32).callsPerSecond.toFixed(0)} gets/s; ${cpuOf("proxy", 32)})`,
          met: null,
        },
        {
          case: 9,
          what: "vault get on the begin scope vs the direct SELECT, throughput at N = 32",
          goal: "≥ 0.5× the direct SELECT",
          value: `${beginRatio.toFixed(2)}× (${r("begin", 32).callsPerSecond.toFixed(0)} vs ${r("direct", 32).callsPerSecond.toFixed(0)} gets/s; p50 at N = 1 ${r("begin", 1).p50.toFixed(2)} ms vs ${r("direct", 1).p50.toFixed(2)} ms; ${cpuOf("begin", 32)}; the plain HTTP floor ${floorRatio.toFixed(2)}×)`,
          met: beginRatio >= 0.5,
        },
        {
          case: 9,
          what: "command items/s through the proxy vs the executable's stdout read directly",
          goal: "≥ 0.3× the direct read",
          value: `${(commandRate.proxy / commandRate.direct).toFixed(2)}× (${commandRate.proxy.toFixed(0)} vs ${commandRate.direct.toFixed(0)} items/s; CPU per item: proxy ${commandCpuPerItem[0]!.toFixed(2)} µs, provider ${commandCpuPerItem[1]!.toFixed(2)} µs)`,
          met: commandRate.proxy / commandRate.direct >= 0.3,
        },
      ],
      tables: [
        {
          title: "Case 9: vault get (one 48-byte value)",
          columns: ["path", "N", "gets/s", "vs (s)", "p50", "p99", "gets", "CPU/get proxy", "CPU/get provider", "CPU/get caller"],
          rows: (["direct", "floor", "proxy", "begin"] as const).flatMap((key) =>
            [1, 32].map((n) => {
              const x = r(key, n);
              const c = cpu[key][String(n)]!;
              return [names[key], String(n), x.callsPerSecond.toFixed(0), `${(x.callsPerSecond / r("direct", n).callsPerSecond).toFixed(2)}×`, `${x.p50.toFixed(2)} ms`, `${x.p99.toFixed(2)} ms`, String(x.calls), us(c[0]), us(c[1]), us(c[2])];
            }),
          ),
          notes: [
            `database: ${database.what}.`,
            `${seconds} s per path and concurrency; the proxy, diverge answer, PostgreSQL and the caller are separate processes on the same machine. Both sides use a pool of 8 connections; the vault's SELECT and the direct one are the same prepared statement.`,
            "The caller is node:http with a keep-alive agent (fetch costs ~0.5 ms of the caller's CPU per request here). CPU per get: user + system time of each process over the run (/proc/<pid>/stat, 10 ms ticks) divided by the gets; for (x) the provider column is the plain server; the caller is this process.",
          ],
        },
        {
          title: `Case 9: command, ${lines} lines of output, one item each`,
          columns: ["path", "items/s (best)", "vs direct", "seconds per run (each)", "CPU/item proxy", "CPU/item provider"],
          rows: [
            ["(u) the executable's stdout, read line by line", commandRate.direct.toFixed(0), "1.00×", command.direct.map((x) => x.seconds.toFixed(3)).join(", "), "—", "—"],
            ["(v) program → proxy → /requests kind 10 → diverge answer --command-exec", commandRate.proxy.toFixed(0), `${(commandRate.proxy / commandRate.direct).toFixed(2)}×`, command.proxy.map((x) => x.seconds.toFixed(3)).join(", "), `${commandCpuPerItem[0]!.toFixed(2)} µs`, `${commandCpuPerItem[1]!.toFixed(2)} µs`],
          ],
          notes: [
            `${rounds} run(s) each, alternating; the proxy's answer is NDJSON, one {"item":"<base64>"} line per item, read to its {"end":"done"}.`,
            "One item is one message on the answer path (paths.md §5: a message is one item or the error); the provider corks its socket per turn (one write per turn, not per item) and the proxy writes a turn's lines to the program in one write. CPU per item: user + system time of each process over all runs through it, divided by the items.",
          ],
        },
      ],
    };
  } finally {
    for (const close of closers) {
      try {
        await close();
      } catch {
        // Closing what is already closed.
      }
    }
  }
}
