// Postgres over the paths transport (paths.md §6) against a real PostgreSQL: while no provider has
// begun on /, a database connection of the program is announced on /requests (kind 11) and carried
// on /postgres/{channel}; a database that cannot be reached declines it; /requests ending before the
// path opened ends that connection; once begun, the begin-scope pair is used instead.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { WebSocket } from "ws";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, openContainer, pipePostgres, postgresOverPaths, type PathsConnection } from "../src/index.js";
import { startThrowawayPostgres, type ThrowawayPostgres } from "./multiplexed-postgres-server.js";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";

let database: ThrowawayPostgres;
let app: ExampleContainer;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  database = await startThrowawayPostgres();
  app = await startExampleContainer();
}, 120_000);
afterAll(async () => {
  await app?.close();
  await database?.stop();
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function proxy(): Promise<RunningProxy> {
  const running = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
  cleanups.push(() => running.close());
  return running;
}

function provider(running: RunningProxy, target: string): { connection: PathsConnection; kinds: string[] } {
  const kinds: string[] = [];
  const connection = connectProxy(`ws://127.0.0.1:${running.port}`, { raw: postgresOverPaths(target) }, { onEvent: (event) => event.type === "ask" && kinds.push(event.ask.variant) });
  cleanups.push(() => connection.close());
  return { connection, kinds };
}

function driver(running: RunningProxy): pg.Client {
  const client = new pg.Client({ host: "127.0.0.1", port: running.multiplexed.pgPort, user: "postgres", database: "postgres", connectionTimeoutMillis: 60_000 });
  client.on("error", () => {});
  cleanups.push(() => client.end());
  return client;
}

describe("postgres over /requests kind 11 and /postgres/{channel}", () => {
  it("carries a driver's connection to the provider's database: queries, several connections at once", { timeout: 120_000 }, async () => {
    const running = await proxy();
    const { connection, kinds } = provider(running, database.url);
    await connection.whenConnected({ timeoutMs: 60_000 });
    const clients = [driver(running), driver(running), driver(running)];
    await Promise.all(clients.map((client) => client.connect()));
    const rows = await Promise.all(clients.map((client, i) => client.query("select $1::int * 2 as doubled", [i + 1])));
    expect(rows.map((result) => result.rows[0].doubled)).toEqual([2, 4, 6]);
    // A large result comes through whole.
    const big = await clients[0]!.query("select repeat('x', 1000000) as blob");
    expect(big.rows[0].blob).toHaveLength(1_000_000);
    expect(kinds.filter((kind) => kind === "Postgres")).toHaveLength(3);
    expect(running.paths.postgres.stats.carried).toBe(3);
  });

  it("a driver that connected before /requests opened waits, unread, and is carried once it opens", { timeout: 120_000 }, async () => {
    const running = await proxy();
    const client = driver(running);
    const connecting = client.connect();
    // Held by the proxy (its condition, polled; a loaded machine takes its time to accept).
    for (const deadline = Date.now() + 60_000; running.multiplexed.held !== 1 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(running.multiplexed.held).toBe(1);
    provider(running, database.url);
    await connecting;
    expect((await client.query("select 1 as one")).rows).toEqual([{ one: 1 }]);
  });

  it("a database the provider cannot reach declines the connection: the driver sees the server hang up", { timeout: 120_000 }, async () => {
    const running = await proxy();
    const { connection } = provider(running, "postgres://127.0.0.1:9/postgres");
    await connection.whenConnected({ timeoutMs: 60_000 });
    await expect(driver(running).connect()).rejects.toThrow();
    expect(running.paths.postgres.stats.declined).toBe(1);
  });

  it("/requests ending before the path opened ends that connection; it is never asked again", { timeout: 120_000 }, async () => {
    const running = await proxy();
    // A provider that holds /requests but never opens the path, then goes.
    const requests = new WebSocket(`ws://127.0.0.1:${running.port}/requests`);
    const asked: Buffer[] = [];
    requests.on("message", (data: Buffer) => asked.push(data));
    await new Promise((resolve) => requests.once("open", resolve));
    const client = driver(running);
    const connecting = client.connect();
    while (asked.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(asked[0]![4]).toBe(11);
    requests.terminate();
    await expect(connecting).rejects.toThrow();
    expect(running.paths.postgres.stats.lost).toBe(1);
    // The next /requests connection is not asked it again.
    const again = new WebSocket(`ws://127.0.0.1:${running.port}/requests`);
    const reasked: Buffer[] = [];
    again.on("message", (data: Buffer) => reasked.push(data));
    await new Promise((resolve) => again.once("open", resolve));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(reasked).toHaveLength(0);
    again.close();
  });

  it("once a provider has begun on /, the begin-scope pair carries it instead", { timeout: 120_000 }, async () => {
    const running = await proxy();
    const { connection: paths, kinds } = provider(running, database.url);
    await paths.whenConnected({ timeoutMs: 60_000 });
    const container = await openContainer(`ws://127.0.0.1:${running.port}`, { onPostgres: (announced) => pipePostgres(announced, database.url) });
    cleanups.push(() => container.close());
    await container.beginTools({ arguments: { greeting: "Hi" } });
    const client = driver(running);
    await client.connect();
    expect((await client.query("select 2 as two")).rows).toEqual([{ two: 2 }]);
    expect(kinds).not.toContain("Postgres");
    expect(running.stats().postgres).toMatchObject({});
    expect(running.paths.postgres.stats.announced).toBe(0);
  });
});
