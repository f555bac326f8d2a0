// Flow control of the database connections against a real PostgreSQL, over real sockets: the
// multiplexed connection's hybrid (a pair buffers within its budget while every other channel flows;
// past it the pair's backlog waits in a temporary file instead of being ended), on the proxy's side and on the
// provider's, and the paths transport's raw postgres (kind 11) pushing back both ways. Every bound is
// asserted on the proxy's or the provider's own counters, never on timing.
import { connect, type Socket } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { startProxy, type ProxyOptions, type RunningProxy } from "@diverge/server";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { connectProxy, openContainer, pipePostgres, postgresOverPaths, type MultiplexedConnection, type PostgresPathsStats } from "../src/index.js";
import { startThrowawayPostgres, type ThrowawayPostgres } from "./multiplexed-postgres-server.js";

const MiB = 1024 * 1024;
/** What the WebSocket (or a net socket) may already have read off TCP when it is paused. */
const ONE_READ = 64 * 1024;

let database: ThrowawayPostgres;
let app: ExampleContainer;
let pgPortOfProxy = 0;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  database = await startThrowawayPostgres();
  app = await startExampleContainer({ pgPort: () => pgPortOfProxy, database: { user: "postgres", database: "postgres" } });
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

async function begunProvider(running: RunningProxy, budgetBytes?: number): Promise<MultiplexedConnection> {
  const connection = await openContainer(`ws://127.0.0.1:${running.port}/`, {
    onPostgres: (announced) => void pipePostgres(announced, database.url, { budgetBytes }).catch(() => {}),
  });
  cleanups.push(() => connection.close());
  await connection.beginTools({ arguments: { greeting: "Hi" } });
  return connection;
}

function driver(running: RunningProxy): pg.Client {
  const client = new pg.Client({ host: "127.0.0.1", port: running.multiplexed.pgPort, user: "postgres", database: "postgres", connectionTimeoutMillis: 60_000 });
  client.on("error", () => {});
  cleanups.push(() => client.end());
  return client;
}

/** Makes `client`'s socket stop reading for `pauseMs` after every `every` bytes it has read. */
function readSlowly(client: pg.Client, every: number, pauseMs: number): { readonly received: number } {
  const stream = (client as unknown as { connection: { stream: Socket } }).connection.stream;
  const state = { received: 0 };
  let next = every;
  stream.on("data", (chunk: Buffer) => {
    state.received += chunk.length;
    if (state.received < next) return;
    next += every;
    stream.pause();
    setTimeout(() => stream.resume(), pauseMs);
  });
  return state;
}

/**
 * A pgwire client by hand, to pipeline what `pg` never does: several queries written at once, so the
 * database (busy with the first) leaves the rest unread.
 */
async function rawDriver(port: number): Promise<{ socket: Socket; readyCount: () => number; query(sql: string): void; results: string[] }> {
  const socket = connect({ host: "127.0.0.1", port });
  socket.on("error", () => {});
  cleanups.push(() => socket.destroy());
  let buffer = Buffer.alloc(0);
  let ready = 0;
  const results: string[] = [];
  socket.on("data", (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    while (buffer.length >= 5 && buffer.length >= 1 + buffer.readInt32BE(1)) {
      const type = String.fromCharCode(buffer[0]!);
      const body = buffer.subarray(5, 1 + buffer.readInt32BE(1));
      // DataRow with one column: its text.
      if (type === "D") results.push(body.subarray(6, 6 + body.readInt32BE(2)).toString());
      if (type === "Z") ready++;
      buffer = buffer.subarray(1 + buffer.readInt32BE(1));
    }
  });
  await new Promise((resolve) => socket.once("connect", resolve));
  const params = Buffer.from("user\0postgres\0database\0postgres\0\0");
  const startup = Buffer.alloc(8);
  startup.writeInt32BE(8 + params.length, 0);
  startup.writeInt32BE(196608, 4);
  socket.write(Buffer.concat([startup, params]));
  await waitUntil(() => ready === 1, 10_000, "the database to be ready");
  return {
    socket,
    readyCount: () => ready,
    results,
    query(sql) {
      const text = Buffer.from(`${sql}\0`);
      const head = Buffer.alloc(5);
      head.write("Q", 0);
      head.writeInt32BE(4 + text.length, 1);
      socket.write(Buffer.concat([head, text]));
    },
  };
}

async function waitUntil(done: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("the multiplexed connection's flow control", () => {
  it("a 100 MB result to a driver that stops reading for 200 ms every 8 MB completes; the proxy holds at most the pair's budget, one frame and one disk read in memory", { timeout: 120_000 }, async () => {
    // A hard cap well below the result: before the hybrid, the pair was ended there.
    const running = await proxy({ maxPairBacklogBytes: 32 * MiB });
    const budget = running.options.pairBudgetBytes;
    const connection = await begunProvider(running);
    const client = driver(running);
    await client.connect();
    const slow = readSlowly(client, 8 * MiB, 200);
    const result = await client.query("SELECT repeat('x', 65536) AS r FROM generate_series(1, 1600)");
    expect(result.rows).toHaveLength(1600);
    expect(result.rows.every((row: { r: string }) => row.r.length === 65536)).toBe(true);
    expect(slow.received).toBeGreaterThan(100 * MiB);
    const stats = running.stats().postgres;
    expect(stats.endedOverBacklog).toBe(0);
    expect(stats.endedStalled).toBe(0);
    // The driver's pauses never paused the connection: past the budget its bytes waited on disk.
    expect(stats.pausedConnection).toBe(0);
    expect(stats.spilled).toBeGreaterThan(0);
    expect(stats.endedOverSpill).toBe(0);
    expect(running.options.spillPool.used).toBe(0);
    // Each frame the provider sends is one database read (at most 64 KiB); a read back from disk is at most 256 KiB.
    expect(stats.maxProgramBuffered).toBeLessThanOrEqual(budget + 64 * 1024 + 256 * 1024);
    // The connection is still whole: another exchange on it is answered.
    expect((await connection.mcp.listTools()).tools.length).toBeGreaterThan(0);
  });

  it("a database that leaves 20 MB of one driver's bytes unread (within the provider's budget) stalls no other channel: another driver's query and an MCP exchange complete first", { timeout: 120_000 }, async () => {
    // Proves the provider's side: its pair buffers toward a slow database within its budget (32 MiB
    // here) without pausing the connection. (Before, any write the database did not take at once
    // paused the whole connection until the database drained.)
    const running = await proxy();
    const connection = await begunProvider(running, 32 * MiB);
    const other = driver(running);
    await other.connect();
    const slow = await rawDriver(running.multiplexed.pgPort);
    // The database sleeps 4 s; the 20 MB query behind it waits unread, mostly in the provider's socket buffer.
    const big = 20 * MiB;
    slow.query("SELECT pg_sleep(4)");
    slow.query(`SELECT length('${"y".repeat(big)}')`);
    await waitUntil(() => running.stats().postgres.toProviderBytes >= big, 60_000, "the proxy to hand the 20 MB to the provider");
    const answered = await other.query("SELECT 41 + 1 AS n");
    expect(answered.rows[0].n).toBe(42);
    expect((await connection.mcp.listTools()).tools.length).toBeGreaterThan(0);
    // Both came back while the slow driver's database was still asleep.
    expect(slow.readyCount()).toBe(1);
    await waitUntil(() => slow.readyCount() === 3, 30_000, "the slow driver's answers");
    expect(slow.results).toEqual(["", String(big)]);
  });
});

describe("the paths transport's raw postgres (kind 11)", () => {
  function pathsProvider(running: RunningProxy, stats: PostgresPathsStats): void {
    const connection = connectProxy(`ws://127.0.0.1:${running.port}`, { raw: postgresOverPaths(database.url, { stats }) });
    cleanups.push(() => connection.close());
  }

  it("toward the database: a database that reads nothing pauses the path at the provider, the proxy stops reading the driver, and every byte arrives", { timeout: 120_000 }, async () => {
    const running = await proxy();
    const stats: PostgresPathsStats = { maxDatabaseBuffered: 0, pathPauses: 0 };
    pathsProvider(running, stats);
    const slow = await rawDriver(running.multiplexed.pgPort);
    expect(running.paths.postgres.stats.carried).toBe(1);
    const big = 24 * MiB;
    slow.query("SELECT pg_sleep(3)");
    slow.query(`SELECT length('${"z".repeat(big)}')`);
    await waitUntil(() => stats.pathPauses > 0, 60_000, "the provider to stop reading the path");
    await waitUntil(() => slow.readyCount() === 3, 30_000, "the answers");
    expect(slow.results).toEqual(["", String(big)]);
    // The provider held at most its high-water mark (1 MiB), one message and one read.
    expect(stats.maxDatabaseBuffered).toBeLessThanOrEqual(MiB + 2 * ONE_READ);
    // The proxy's bytes in flight toward the provider stayed bounded: the driver was pushed back.
    expect(running.paths.postgres.stats.maxInFlight).toBeLessThanOrEqual(MiB + ONE_READ);
  });

  it("toward the driver: a driver that stops reading for 200 ms every 4 MB gets a 40 MB result whole, the proxy holding at most its high-water mark, one message and one read", { timeout: 120_000 }, async () => {
    const running = await proxy();
    const stats: PostgresPathsStats = { maxDatabaseBuffered: 0, pathPauses: 0 };
    pathsProvider(running, stats);
    const client = new pg.Client({ host: "127.0.0.1", port: running.multiplexed.pgPort, user: "postgres", database: "postgres", connectionTimeoutMillis: 60_000 });
    client.on("error", () => {});
    cleanups.push(() => client.end());
    await client.connect();
    readSlowly(client, 4 * MiB, 200);
    const result = await client.query("SELECT repeat('w', 65536) AS r FROM generate_series(1, 640)");
    expect(result.rows).toHaveLength(640);
    const proxySide = running.paths.postgres.stats;
    expect(proxySide.pathPauses).toBeGreaterThan(0);
    expect(proxySide.maxDriverBuffered).toBeLessThanOrEqual(MiB + 2 * ONE_READ);
  });
});
