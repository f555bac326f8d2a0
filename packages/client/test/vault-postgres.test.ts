// PostgresVault end to end: two proxies (two containers) whose providers keep one store on one real
// PostgreSQL contend for one key through the program-facing API; and the embedded PGlite store.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, PostgresVault, type ProxyConnection } from "../src/index.js";
import { startThrowawayPostgres, type ThrowawayPostgres } from "./multiplexed-postgres-server.js";

let postgres: ThrowawayPostgres;
beforeAll(async () => {
  postgres = await startThrowawayPostgres();
}, 120_000);
afterAll(async () => {
  await postgres?.stop();
});

const running: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of running.splice(0).reverse()) await item.close();
});

interface Container {
  readonly proxy: RunningProxy;
  connection: ProxyConnection;
  readonly vault: PostgresVault;
  call(method: string, path: string, body?: string): Promise<{ status: number; text: string }>;
}

/** A proxy (one container) and its provider, answering vault asks from the shared store. */
async function container(holder: string, vault?: PostgresVault): Promise<Container> {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, log: () => {} });
  running.push(proxy);
  const v = vault ?? (await PostgresVault.connect(postgres.url, { namespace: "shared", holder }));
  if (!vault) running.push(v);
  const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, v.handlers(), { minBackoffMs: 10, maxBackoffMs: 50 });
  running.push(connection);
  return {
    proxy,
    connection,
    vault: v,
    async call(method, path, body) {
      const response = await fetch(`http://127.0.0.1:${proxy.programPort}${path}`, { method, body });
      return { status: response.status, text: await response.text() };
    },
  };
}

const settledWithin = async <T>(promise: Promise<T>, ms: number): Promise<boolean> =>
  Promise.race([promise.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

describe("PostgresVault on one real PostgreSQL", () => {
  it("stores, reads and deletes values; creates its tables on first use", async () => {
    const a = await container("container-a");
    expect((await a.call("GET", "/vault/store-k")).status).toBe(404);
    expect((await a.call("PUT", "/vault/store-k", "v1")).status).toBe(204);
    expect(await a.call("GET", "/vault/store-k")).toEqual({ status: 200, text: "v1" });
    expect((await a.call("PUT", "/vault/store-k", "")).status).toBe(204);
    expect(await a.call("GET", "/vault/store-k")).toEqual({ status: 200, text: "" });
    expect((await a.call("DELETE", "/vault/store-k")).status).toBe(204);
    expect((await a.call("DELETE", "/vault/store-k")).status).toBe(204);
    expect((await a.call("GET", "/vault/store-k")).status).toBe(404);
  });

  it("two containers contend for one key: the second lock is answered only once the first is released, or expires", async () => {
    const a = await container("container-a");
    const b = await container("container-b");
    expect((await a.call("POST", "/vault/lock-k/lock?ttl=30")).status).toBe(204);
    // The holder locks again: refreshed, answered at once.
    expect((await a.call("POST", "/vault/lock-k/lock?ttl=30")).status).toBe(204);
    const second = b.call("POST", "/vault/lock-k/lock?ttl=1");
    expect(await settledWithin(second, 400)).toBe(false);
    // Unlock by a container that does not hold it is refused.
    const refused = await b.call("POST", "/vault/other-k/unlock");
    expect(refused.status).toBe(502);
    expect(refused.text).toContain("is not held by this container");
    // The holder is the container, not the connection: its provider reconnecting changes nothing.
    await a.connection.close();
    a.connection = connectProxy(`ws://127.0.0.1:${a.proxy.port}`, a.vault.handlers(), { minBackoffMs: 10, maxBackoffMs: 50 });
    running.push(a.connection);
    expect(await settledWithin(second, 300)).toBe(false);
    expect((await a.call("POST", "/vault/lock-k/unlock")).status).toBe(204);
    expect((await second).status).toBe(204);
    // B's lock of one second expires silently; then A is answered.
    const started = Date.now();
    expect((await a.call("POST", "/vault/lock-k/lock?ttl=5")).status).toBe(204);
    expect(Date.now() - started).toBeGreaterThan(500);
    // A's own unlock after B's expiry: A holds it now, so it is done.
    expect((await a.call("POST", "/vault/lock-k/unlock")).status).toBe(204);
    // A lock of zero seconds is refused: by the API before asking, and by the store if asked.
    const zero = await a.call("POST", "/vault/lock-k/lock?ttl=0");
    expect(zero).toEqual({ status: 400, text: "ttl must be a number of seconds from 1 to 4294967295\n" });
    expect(await a.vault.lock("lock-k", 0)).toEqual({ variant: "Error", message: "a lock of zero seconds is refused" });
  }, 120_000);
});

describe("PostgresVault waits for a lock without polling", () => {
  it("an unlock notifies the waiting vault, which takes the lock at once: no timer runs out, few looks", async () => {
    // A fallback of a minute: a waiter that only looked on its timer would not be answered within the test.
    const a = await PostgresVault.connect(postgres.url, { namespace: "notify", holder: "a", recheckMs: 60_000 });
    const b = await PostgresVault.connect(postgres.url, { namespace: "notify", holder: "b", recheckMs: 60_000 });
    running.push(a, b);
    expect(await a.lock("k", 3600)).toEqual({ variant: "Done" });
    const second = b.lock("k", 3600);
    // B has looked, listened and looked again; then it waits.
    while (b.lockAttempts < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await settledWithin(second, 500)).toBe(false);
    expect(await a.unlock("k")).toEqual({ variant: "Done" });
    expect(await second).toEqual({ variant: "Done" });
    // Two looks before waiting and one after the notification: a poller would have looked every few milliseconds.
    expect(b.lockAttempts).toBe(3);
    expect(await a.unlock("k")).toEqual({ variant: "Error", message: 'the lock on "k" is not held by this container' });
    expect(await b.unlock("k")).toEqual({ variant: "Done" });
  }, 120_000);

  it("an expiring lock sends nothing: the waiter looks again when the holder's time runs out", async () => {
    const a = await PostgresVault.connect(postgres.url, { namespace: "notify", holder: "a", recheckMs: 60_000 });
    const b = await PostgresVault.connect(postgres.url, { namespace: "notify", holder: "b", recheckMs: 60_000 });
    running.push(a, b);
    expect(await a.lock("expiring", 1)).toEqual({ variant: "Done" });
    expect(await b.lock("expiring", 10)).toEqual({ variant: "Done" });
    expect(b.lockAttempts).toBeLessThanOrEqual(4);
    expect(await a.unlock("expiring")).toEqual({ variant: "Error", message: 'the lock on "expiring" is not held by this container' });
  }, 120_000);

  it("a LISTEN whose connection drops is made again: the next unlock still wakes the waiter", async () => {
    const a = await PostgresVault.connect(postgres.url, { namespace: "notify", holder: "a", recheckMs: 60_000 });
    const b = await PostgresVault.connect(postgres.url, { namespace: "notify", holder: "b", recheckMs: 60_000 });
    running.push(a, b);
    const { default: pg } = await import("pg");
    const sql = new pg.Client({ connectionString: postgres.url });
    await sql.connect();
    running.push({ close: () => sql.end() });
    const listeners = async () => Number((await sql.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE 'LISTEN %'`)).rows[0].n);
    expect(await a.lock("dropped", 3600)).toEqual({ variant: "Done" });
    const second = b.lock("dropped", 3600);
    while (b.lockAttempts < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await listeners()).toBe(1);
    await sql.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'`);
    // B looks again at once, and listens again.
    while (b.lockAttempts < 3) await new Promise((resolve) => setTimeout(resolve, 10));
    for (let n = 0; (await listeners()) !== 1 && n < 500; n++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await listeners()).toBe(1);
    expect(await settledWithin(second, 200)).toBe(false);
    expect(await a.unlock("dropped")).toEqual({ variant: "Done" });
    expect(await second).toEqual({ variant: "Done" });
    expect(await b.unlock("dropped")).toEqual({ variant: "Done" });
  }, 120_000);

  it("a waiting lock whose path ends gives up without an answer and leaves no waiter behind", async () => {
    const a = await PostgresVault.connect(postgres.url, { namespace: "notify", holder: "a", recheckMs: 60_000 });
    const b = await PostgresVault.connect(postgres.url, { namespace: "notify", holder: "b", recheckMs: 60_000 });
    running.push(a, b);
    expect(await a.lock("abandoned", 3600)).toEqual({ variant: "Done" });
    const controller = new AbortController();
    const waiting = b.lock("abandoned", 5, controller.signal);
    while (b.lockAttempts < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort();
    expect(await waiting).toBeUndefined();
    // Not taken: A still holds it.
    expect(await a.unlock("abandoned")).toEqual({ variant: "Done" });
  }, 120_000);
});

describe("PostgresVault on embedded PGlite", () => {
  it("keeps values in its directory across restarts of the vault", async () => {
    const dir = mkdtempSync(join(tmpdir(), "diverge-vault-pglite-"));
    const first = PostgresVault.embedded(dir, { namespace: "demo", holder: "c" });
    const a = await container("c", first);
    expect((await a.call("PUT", "/vault/k", "kept")).status).toBe(204);
    expect((await a.call("POST", "/vault/k/lock?ttl=10", "")).status).toBe(204);
    await a.connection.close();
    await first.close();
    const again = PostgresVault.embedded(dir, { namespace: "demo", holder: "c" });
    running.push(again);
    expect(await again.get("k")).toEqual({ variant: "Present", value: new TextEncoder().encode("kept") });
    expect(await again.get("other")).toEqual({ variant: "Missing" });
  }, 120_000);
});

describe("diverge answer serves the vault", () => {
  it("from the PostgreSQL at --vault-database-url, in its --vault-namespace", async () => {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, log: () => {} });
    running.push(proxy);
    const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
    const child = spawn(process.execPath, [cli, "answer", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--vault-database-url", postgres.url, "--vault-namespace", "cli-ns"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    running.push({ close: async () => void (child.exitCode === null && child.kill("SIGKILL")) });
    const deadline = Date.now() + 90_000;
    while (!stderr.includes("connected to")) {
      if (Date.now() > deadline) throw new Error(`diverge answer did not connect: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(stderr).toContain("vault in PostgreSQL (namespace cli-ns)");
    const base = `http://127.0.0.1:${proxy.programPort}`;
    expect((await fetch(`${base}/vault/cli-k`, { method: "PUT", body: "from the cli" })).status).toBe(204);
    expect(await (await fetch(`${base}/vault/cli-k`)).text()).toBe("from the cli");
    // The value is in the namespace it was given, and only there.
    const other = await PostgresVault.connect(postgres.url, { namespace: "cli-ns", holder: "x" });
    running.push(other);
    expect(await other.get("cli-k")).toEqual({ variant: "Present", value: new TextEncoder().encode("from the cli") });
    child.kill("SIGINT");
    expect(await exited).toBe(0);
  }, 120_000);
});
