// The postgres pair against a real PostgreSQL server: the program's driver (`pg`) dials the proxy's
// postgres listener, the provider pipes its half to the database with pipePostgres.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";
import { databaseAddress, openContainer, pipePostgres, type AnnouncedConnection, type DatabaseAddress, type MultiplexedConnection } from "../src/index.js";
import { startThrowawayPostgres, type ThrowawayPostgres } from "./multiplexed-postgres-server.js";

let database: ThrowawayPostgres;
let app: ExampleContainer;
let pgPortOfProxy = 0;
const proxies: RunningProxy[] = [];
const connections: MultiplexedConnection[] = [];

beforeAll(async () => {
  database = await startThrowawayPostgres();
  app = await startExampleContainer({ pgPort: () => pgPortOfProxy, database: { user: "postgres", database: "postgres" } });
}, 120_000);
afterAll(async () => {
  await app?.close();
  await database?.stop();
});
afterEach(async () => {
  for (const connection of connections.splice(0)) connection.close();
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

async function pairedContainer(onPostgres?: (announced: AnnouncedConnection) => void): Promise<{ proxy: RunningProxy; connection: MultiplexedConnection; announced: number[] }> {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false });
  proxies.push(proxy);
  pgPortOfProxy = proxy.multiplexed.pgPort;
  const announced: number[] = [];
  const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, {
    onPostgres:
      onPostgres ??
      ((connection) => {
        announced.push(connection.id);
        void pipePostgres(connection, database.url).catch(() => {});
      }),
  });
  connections.push(connection);
  await connection.beginTools({ arguments: { greeting: "Hi" } });
  return { proxy, connection, announced };
}

/** The program's driver, dialling the proxy's postgres listener. */
function driver(proxy: RunningProxy): pg.Client {
  return new pg.Client({ host: "127.0.0.1", port: proxy.multiplexed.pgPort, user: "postgres", database: "postgres" });
}

describe("the postgres pair", () => {
  it("carries several concurrent connections, each under its own id", async () => {
    const { proxy, announced } = await pairedContainer();
    const drivers = Array.from({ length: 6 }, () => driver(proxy));
    await Promise.all(drivers.map((client) => client.connect()));
    const results = await Promise.all(drivers.map((client, i) => client.query("SELECT $1::int AS n, pg_sleep(0.05)::text AS slept, pg_backend_pid() AS pid", [i])));
    expect(results.map((result) => result.rows[0].n)).toEqual([0, 1, 2, 3, 4, 5]);
    // Six real backends: six separate database connections, not one shared.
    expect(new Set(results.map((result) => result.rows[0].pid)).size).toBe(6);
    expect([...announced].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
    // A transaction on one connection is invisible to another until it commits.
    await drivers[0]!.query("CREATE TABLE pair_check (v int)");
    await drivers[0]!.query("BEGIN");
    await drivers[0]!.query("INSERT INTO pair_check VALUES (1)");
    expect((await drivers[1]!.query("SELECT count(*)::int AS c FROM pair_check")).rows[0].c).toBe(0);
    await drivers[0]!.query("COMMIT");
    expect((await drivers[1]!.query("SELECT count(*)::int AS c FROM pair_check")).rows[0].c).toBe(1);
    await drivers[0]!.query("DROP TABLE pair_check");
    await Promise.all(drivers.map((client) => client.end()));
  });

  it("streams a result of more than 10 MB without the proxy holding it whole, and measures the pair", async () => {
    const { proxy } = await pairedContainer();
    const client = driver(proxy);
    await client.connect();
    const rows = 48;
    const rowBytes = 1024 * 1024;
    // Warm both ends (the database's cache, the JIT) so the timing measures the pair.
    await client.query("SELECT repeat('w', 4 * 1024 * 1024) AS warm");
    const warmed = proxy.multiplexed.postgresStats();
    const started = performance.now();
    const result = await client.query(`SELECT i, repeat(chr(65 + i % 26), ${rowBytes}) AS blob FROM generate_series(1, ${rows}) AS i`);
    const downSeconds = (performance.now() - started) / 1000;
    expect(result.rows).toHaveLength(rows);
    expect(result.rows.every((row: { i: number; blob: string }) => row.blob.length === rowBytes && row.blob[0] === String.fromCharCode(65 + (row.i % 26)))).toBe(true);
    const total = proxy.multiplexed.postgresStats();
    const down = { ...total, toProgramBytes: total.toProgramBytes - warmed.toProgramBytes, toProgramFrames: total.toProgramFrames - warmed.toProgramFrames };
    expect(down.toProgramBytes).toBeGreaterThan(rows * rowBytes);
    // Bounded: far less than the result ever waits in the proxy's buffers at once.
    expect(down.maxProgramBuffered).toBeLessThan(8 * 1024 * 1024);

    // And the other way: 16 MB the program sends, carried to the database.
    const upload = "z".repeat(16 * 1024 * 1024);
    const upStarted = performance.now();
    const echoed = await client.query("SELECT length($1::text) AS n, md5($1::text) AS digest", [upload]);
    const upSeconds = (performance.now() - upStarted) / 1000;
    expect(echoed.rows[0].n).toBe(upload.length);
    const totalAfter = proxy.multiplexed.postgresStats();
    const after = { ...totalAfter, toProviderBytes: totalAfter.toProviderBytes - total.toProviderBytes, toProviderFrames: totalAfter.toProviderFrames - total.toProviderFrames };
    expect(after.toProviderBytes).toBeGreaterThan(upload.length);

    // Small frames: sequential one-row queries, each a round trip of small frames both ways.
    const trips = 2000;
    const before = proxy.multiplexed.postgresStats();
    const tripsStarted = performance.now();
    for (let i = 0; i < trips; i++) await client.query({ text: "SELECT $1::int AS n", values: [i], rowMode: "array" });
    const tripSeconds = (performance.now() - tripsStarted) / 1000;
    const afterTrips = proxy.multiplexed.postgresStats();
    const smallFrames = afterTrips.toProgramFrames - before.toProgramFrames + (afterTrips.toProviderFrames - before.toProviderFrames);
    expect(after.maxProviderBuffered).toBeLessThan(8 * 1024 * 1024);
    await client.end();

    // The same two queries straight to the database, for comparison.
    const direct = new pg.Client({ connectionString: database.url });
    await direct.connect();
    const directStarted = performance.now();
    await direct.query(`SELECT i, repeat(chr(65 + i % 26), ${rowBytes}) AS blob FROM generate_series(1, ${rows}) AS i`);
    const directDownSeconds = (performance.now() - directStarted) / 1000;
    const directUpStarted = performance.now();
    await direct.query("SELECT length($1::text) AS n, md5($1::text) AS digest", [upload]);
    const directUpSeconds = (performance.now() - directUpStarted) / 1000;
    const directTripsStarted = performance.now();
    for (let i = 0; i < trips; i++) await direct.query({ text: "SELECT $1::int AS n", values: [i], rowMode: "array" });
    const directTripSeconds = (performance.now() - directTripsStarted) / 1000;
    await direct.end();

    const mb = (bytes: number) => bytes / (1024 * 1024);
    const report = {
      direct: { downSeconds: +directDownSeconds.toFixed(3), upSeconds: +directUpSeconds.toFixed(3), queriesPerSecond: Math.round(trips / directTripSeconds) },
      smallQueries: { queries: trips, frames: smallFrames, seconds: +tripSeconds.toFixed(3), queriesPerSecond: Math.round(trips / tripSeconds), framesPerSecond: Math.round(smallFrames / tripSeconds) },
      databaseToProgram: { bytes: down.toProgramBytes, frames: down.toProgramFrames, seconds: +downSeconds.toFixed(3), mbPerSecond: +(mb(down.toProgramBytes) / downSeconds).toFixed(1), framesPerSecond: Math.round(down.toProgramFrames / downSeconds), maxBufferedInProxy: down.maxProgramBuffered },
      programToDatabase: { bytes: after.toProviderBytes, frames: after.toProviderFrames, seconds: +upSeconds.toFixed(3), mbPerSecond: +(mb(after.toProviderBytes) / upSeconds).toFixed(1), framesPerSecond: Math.round(after.toProviderFrames / upSeconds), maxBufferedInProxy: after.maxProviderBuffered },
    };
    console.log(`postgres pair throughput: ${JSON.stringify(report)}`);
  }, 120_000);

  it("closes the driver's socket when the provider declines the connection", async () => {
    const declined: number[] = [];
    const { proxy } = await pairedContainer((announced) => {
      declined.push(announced.id);
      announced.decline();
    });
    const client = driver(proxy);
    client.on("error", () => {});
    await expect(client.connect()).rejects.toThrow();
    expect(declined).toEqual([1]);
  });

  it("declines when the database cannot be reached", async () => {
    const { proxy } = await pairedContainer((announced) => {
      void pipePostgres(announced, { host: "127.0.0.1", port: 1 }).catch(() => {});
    });
    const client = driver(proxy);
    client.on("error", () => {});
    await expect(client.connect()).rejects.toThrow();
  });

  it("answers a program's query through the pair: the example container's query tool", async () => {
    const { connection } = await pairedContainer();
    const result = await connection.mcp.callTool({ name: "query", arguments: { sql: "SELECT 6 * 7 AS answer, current_database() AS db" } });
    expect(result).toEqual({ content: [{ type: "text", text: JSON.stringify([{ answer: 42, db: "postgres" }]) }] });
  });

  it("ends the driver's socket when the database closes the connection", async () => {
    const { proxy } = await pairedContainer();
    const client = driver(proxy);
    const ended = new Promise<void>((resolve) => client.on("end", () => resolve()));
    client.on("error", () => {});
    await client.connect();
    const pid = (await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    await admin.query("SELECT pg_terminate_backend($1)", [pid]);
    await admin.end();
    await ended;
  });
});

describe("the database option's forms", () => {
  /** A container begun with `database` as given, and a driver's query through its pair. */
  async function queryThrough(target: string | DatabaseAddress): Promise<unknown> {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false });
    proxies.push(proxy);
    pgPortOfProxy = proxy.multiplexed.pgPort;
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { database: target });
    connections.push(connection);
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const client = driver(proxy);
    await client.connect();
    try {
      return (await client.query("SELECT current_user AS who, 42 AS n")).rows[0];
    } finally {
      await client.end();
    }
  }

  it("{ host, port } and a Unix socket { path } are where to dial; the driver's own user and database go through", async () => {
    expect(await queryThrough({ host: "127.0.0.1", port: database.port })).toEqual({ who: "postgres", n: 42 });
    expect(await queryThrough({ path: `${database.socketDir}/.s.PGSQL.${database.port}` })).toEqual({ who: "postgres", n: 42 });
  });

  it("a URL gives its host and port only, and says once which of its parts go unused", () => {
    const said: string[] = [];
    const url = `postgres://someone:secret@db.invalid:6543/app?sslmode=require`;
    expect(databaseAddress(url, (text) => said.push(text))).toEqual({ host: "db.invalid", port: 6543 });
    expect(databaseAddress(url, (text) => said.push(text))).toEqual({ host: "db.invalid", port: 6543 });
    expect(said).toEqual(["database db.invalid:6543: only the host and port of the URL are used; its user, password, database, sslmode are the program's driver's to send through the pipe (give { host, port } or { path })"]);
    // The password is named, never quoted.
    expect(said[0]).not.toContain("secret");
    // Nothing to say about a URL of a host and port alone.
    expect(databaseAddress("postgres://127.0.0.1:5433", () => said.push("unexpected"))).toEqual({ host: "127.0.0.1", port: 5433 });
    expect(said).toHaveLength(1);
  });
});
