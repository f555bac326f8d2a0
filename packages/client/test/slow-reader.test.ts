// A slow reader never cuts a pair and never stalls the others, against a real PostgreSQL and the real
// pg_dump: `pg_dump … | (sleep …; wc -c)` through the proxy, on both transports. The dump's reader
// stops reading until every other exchange of the test has been answered (no clock in any assertion):
// on the multiplexed connection the pair's backlog past its budget goes to a temporary file (the
// proxy's memory stays at the budget), the other driver and an MCP exchange are answered meanwhile,
// and once the reader reads again the dump arrives whole, the same bytes as read directly.
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { startProxy, type ProxyOptions, type RunningProxy } from "@diverge/server";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { connectProxy, openContainer, pipePostgres, postgresOverPaths, type MultiplexedConnection, type PostgresPathsStats } from "../src/index.js";
import { binDir, startThrowawayPostgres, type ThrowawayPostgres } from "./multiplexed-postgres-server.js";

const MiB = 1024 * 1024;
/** Rows of about 640 B: a dump of about 40 MB. */
const ROWS = 64_000;

let database: ThrowawayPostgres;
let app: ExampleContainer;
let pgPortOfProxy = 0;
let direct: { bytes: number; sha: string };
const cleanups: (() => unknown)[] = [];

interface Dump {
  readonly child: ChildProcess;
  readonly done: Promise<{ bytes: number; sha: string; code: number | null; stderr: string }>;
  /** Starts reading pg_dump's output (until then it reads nothing at all). */
  read(): void;
}

/** Runs the real pg_dump against `port`; its output is not read until `read()`. */
function pgDump(port: number): Dump {
  const child = spawn(join(binDir(), "pg_dump"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-t", "big", "postgres"], { stdio: ["ignore", "pipe", "pipe"] });
  cleanups.push(() => child.kill("SIGKILL"));
  child.stdout!.pause();
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const chunks: Buffer[] = [];
  let bytes = 0;
  const done = new Promise<{ bytes: number; sha: string; code: number | null; stderr: string }>((resolve) => {
    // pg_dump writes a fresh random key on its `\restrict` / `\unrestrict` lines: left out of the comparison.
    child.once("close", (code) => {
      const text = Buffer.concat(chunks).toString("utf8").replace(/^\\(un)?restrict .*$/gm, "");
      resolve({ bytes, sha: createHash("sha256").update(text).digest("hex"), code, stderr });
    });
  });
  return {
    child,
    done,
    read() {
      child.stdout!.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
        chunks.push(chunk);
      });
      child.stdout!.resume();
    },
  };
}

beforeAll(async () => {
  database = await startThrowawayPostgres();
  const setup = new pg.Client({ connectionString: database.url });
  await setup.connect();
  await setup.query(`CREATE TABLE big AS SELECT g, repeat(md5(g::text), 20) AS t FROM generate_series(1, ${ROWS}) g`);
  await setup.end();
  app = await startExampleContainer({ pgPort: () => pgPortOfProxy, database: { user: "postgres", database: "postgres" } });
  const dump = pgDump(database.port);
  dump.read();
  const result = await dump.done;
  expect(result.code).toBe(0);
  direct = result;
}, 120_000);
afterAll(async () => {
  await app?.close();
  await database?.stop();
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await Promise.resolve(cleanup()).catch(() => {});
});

async function proxy(options: ProxyOptions = {}): Promise<RunningProxy> {
  const running = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, ...options });
  cleanups.push(() => running.close());
  pgPortOfProxy = running.multiplexed.pgPort;
  return running;
}

async function waitUntil(done: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function otherDriver(port: number): Promise<number> {
  const client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", database: "postgres", connectionTimeoutMillis: 60_000 });
  client.on("error", () => {});
  cleanups.push(() => client.end());
  await client.connect();
  const answer = await client.query("SELECT count(*)::int AS n FROM big");
  return answer.rows[0].n as number;
}

describe("a slow reader through the proxy", () => {
  it("multiplexed: pg_dump into a reader that reads nothing spills past the budget, the other driver and MCP flow meanwhile, and the dump arrives whole", { timeout: 120_000 }, async () => {
    // A stall limit far below the reader's pause: before spilling, the pair was cut here.
    const running = await proxy({ pairBudgetBytes: 2 * MiB, pairStallMs: 500 });
    const connection: MultiplexedConnection = await openContainer(`ws://127.0.0.1:${running.port}/`, {
      onPostgres: (announced) => void pipePostgres(announced, database.url).catch(() => {}),
    });
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const dump = pgDump(running.multiplexed.pgPort);
    // The reader reads nothing: well past the budget, the dump waits on disk.
    await waitUntil(() => running.stats().postgres.spilledBytes > 16 * MiB, 30_000, "the pair to spill 16 MB");
    expect(await otherDriver(running.multiplexed.pgPort)).toBe(ROWS);
    expect((await connection.mcp.listTools()).tools.length).toBeGreaterThan(0);
    // Still nothing read; a stall of longer than pairStallMs has passed and nothing was cut.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const during = running.stats().postgres;
    expect(during.endedStalled + during.endedOverSpill + during.endedOverBacklog).toBe(0);
    expect(during.pausedConnection).toBe(0);
    dump.read();
    const result = await dump.done;
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.bytes).toBe(direct.bytes);
    expect(result.sha).toBe(direct.sha);
    const stats = running.stats().postgres;
    expect(stats.spilled).toBeGreaterThan(0);
    expect(stats.endedStalled + stats.endedOverSpill + stats.endedOverBacklog).toBe(0);
    // Memory stayed at the budget: one frame (a database read) and one disk read past it.
    expect(stats.maxProgramBuffered).toBeLessThanOrEqual(2 * MiB + 64 * 1024 + 256 * 1024);
    // Every temporary byte is given back.
    expect(running.options.spillPool.used).toBe(0);
  });

  it("multiplexed: a pair past its disk cap ends alone, and the connection goes on", { timeout: 120_000 }, async () => {
    const running = await proxy({ pairBudgetBytes: 1 * MiB, maxPairSpillBytes: 4 * MiB });
    const connection = await openContainer(`ws://127.0.0.1:${running.port}/`, {
      onPostgres: (announced) => void pipePostgres(announced, database.url).catch(() => {}),
    });
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const dump = pgDump(running.multiplexed.pgPort);
    await waitUntil(() => running.stats().postgres.endedOverSpill === 1, 30_000, "the pair to reach its disk cap");
    dump.read();
    const result = await dump.done;
    expect(result.code).not.toBe(0);
    expect(running.stats().postgres.maxSpilledBytes).toBeLessThanOrEqual(4 * MiB);
    expect(running.options.spillPool.used).toBe(0);
    expect(await otherDriver(running.multiplexed.pgPort)).toBe(ROWS);
    expect((await connection.mcp.listTools()).tools.length).toBeGreaterThan(0);
  });

  it("paths: pg_dump into a reader that reads nothing is pushed back, another driver flows meanwhile, and the dump arrives whole", { timeout: 120_000 }, async () => {
    const running = await proxy({ pairStallMs: 500 });
    const stats: PostgresPathsStats = { maxDatabaseBuffered: 0, pathPauses: 0 };
    const connection = connectProxy(`ws://127.0.0.1:${running.port}`, { raw: postgresOverPaths(database.url, { stats }) });
    cleanups.push(() => connection.close());
    const dump = pgDump(running.multiplexed.pgPort);
    await waitUntil(() => running.paths.postgres.stats.pathPauses > 0, 30_000, "the path to push back");
    expect(await otherDriver(running.multiplexed.pgPort)).toBe(ROWS);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    dump.read();
    const result = await dump.done;
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.sha).toBe(direct.sha);
  });
});
