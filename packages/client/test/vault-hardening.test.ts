// The vault hardened (issue 24 §3), over real sockets, a real proxy and a real PostgreSQL, on both
// transports (the begin scope's proxy-opened tags 2-6, and /requests kinds 5-9):
// - a key is exactly the percent-decoded bytes of its raw segment (`.`, `..`, `%2E`, `\` included);
// - a key containing U+0000 is stored and read back, and a store made with text keys is converted;
// - a PUT whose ask is over the proxy's message limit is 400 on both transports, and nothing is asked;
// - a lock whose program left while waiting is released as soon as it is granted;
// - the lock holder is the container (--container-id, else a random id per run), never the --proxy
//   URL: two containers reached at the same URL string (two network namespaces) are two holders;
// - without --vault-dir nothing is left under the OS temp dir.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, openContainer, PostgresVault, type ProviderHandlers } from "../src/index.js";
import { AnswerUndelivered } from "../src/exchanges/engine.js";
import { startThrowawayPostgres, type ThrowawayPostgres } from "./multiplexed-postgres-server.js";

type Transport = "multiplexed" | "paths";
const TRANSPORTS: readonly Transport[] = ["multiplexed", "paths"];
const CLI = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const PROXY_CLI = fileURLToPath(new URL("../../server/dist/cli.js", import.meta.url));

let postgres: ThrowawayPostgres;
beforeAll(async () => {
  postgres = await startThrowawayPostgres();
}, 120_000);
afterAll(async () => {
  await postgres?.stop();
});

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

let namespaces = 0;
async function store(holder?: string, namespace = `hardening-${process.pid}-${++namespaces}`): Promise<PostgresVault> {
  const vault = await PostgresVault.connect(postgres.url, { namespace, holder });
  cleanups.push(() => vault.close());
  return vault;
}

async function proxy(maxMessageBytes?: number): Promise<RunningProxy> {
  const app = await startExampleContainer();
  cleanups.push(() => app.close());
  const p = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {}, ...(maxMessageBytes ? { maxMessageBytes } : {}) });
  cleanups.push(() => p.close());
  return p;
}

/** The provider on `transport`: begun on / (its vault asks on tags 2-6), or holding /requests (kinds 5-9). */
async function provide(p: RunningProxy, transport: Transport, handlers: ProviderHandlers): Promise<void> {
  if (transport === "multiplexed") {
    const connection = await openContainer(`ws://127.0.0.1:${p.port}`, { handlers });
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hello" } });
    return;
  }
  const connection = connectProxy(`ws://127.0.0.1:${p.port}`, handlers, { minBackoffMs: 10, maxBackoffMs: 50 });
  cleanups.push(() => connection.close());
  await connection.whenConnected({ timeoutMs: 60_000 });
}

/** One HTTP request whose target goes out byte for byte (fetch would normalise it first). */
function raw(port: number, method: string, path: string, body?: string | Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: "127.0.0.1", port, method, path, headers: body === undefined ? {} : { "content-length": Buffer.byteLength(body) } }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      response.on("error", reject);
    });
    request.on("error", reject);
    request.end(body);
  });
}

const settledWithin = async <T>(promise: Promise<T>, ms: number): Promise<boolean> =>
  Promise.race([promise.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

const text = (value: string) => ({ variant: "Present", value: new TextEncoder().encode(value) });

describe("vault keys are the raw segment's percent-decoded bytes", () => {
  for (const transport of TRANSPORTS) {
    it(`".", "..", "%2E", "\\\\" and "" are keys of their own — ${transport}`, { timeout: 120_000 }, async () => {
      const p = await proxy();
      const vault = await store();
      await provide(p, transport, vault.handlers());
      expect((await raw(p.programPort, "PUT", "/vault/", "empty")).status).toBe(204);
      expect((await raw(p.programPort, "PUT", "/vault/%2E", "dot")).status).toBe(204);
      expect((await raw(p.programPort, "PUT", "/vault/..", "dot dot")).status).toBe(204);
      expect((await raw(p.programPort, "PUT", "/vault/a\\b", "backslash")).status).toBe(204);
      expect((await raw(p.programPort, "PUT", "/vault/a%2Fb", "slash")).status).toBe(204);
      expect(await raw(p.programPort, "GET", "/vault/")).toEqual({ status: 200, text: "empty" });
      expect(await raw(p.programPort, "GET", "/vault/.")).toEqual({ status: 200, text: "dot" });
      expect(await raw(p.programPort, "GET", "/vault/%2e%2E")).toEqual({ status: 200, text: "dot dot" });
      expect(await raw(p.programPort, "GET", "/vault/a%5Cb")).toEqual({ status: 200, text: "backslash" });
      expect(await raw(p.programPort, "GET", "/vault/a%2fb")).toEqual({ status: 200, text: "slash" });
      // In the store, under exactly those keys.
      expect(await vault.get("")).toEqual(text("empty"));
      expect(await vault.get(".")).toEqual(text("dot"));
      expect(await vault.get("..")).toEqual(text("dot dot"));
      expect(await vault.get("a\\b")).toEqual(text("backslash"));
      expect(await vault.get("a/b")).toEqual(text("slash"));
      // ".." takes a lock like any key; a segment that is not UTF-8 or not an escape is 400.
      expect((await raw(p.programPort, "POST", "/vault/../lock?ttl=30")).status).toBe(204);
      expect((await raw(p.programPort, "POST", "/vault/%2E%2E/unlock")).status).toBe(204);
      expect((await raw(p.programPort, "GET", "/vault/%FF")).status).toBe(400);
      expect((await raw(p.programPort, "GET", "/vault/%zz")).status).toBe(400);
      expect((await raw(p.programPort, "DELETE", "/vault/.")).status).toBe(204);
      expect(await vault.get(".")).toEqual({ variant: "Missing" });
      expect(await vault.get("")).toEqual(text("empty"));
    });
  }
});

describe("a key containing U+0000", () => {
  for (const transport of TRANSPORTS) {
    it(`is stored and read back, apart from the key without it — ${transport}`, { timeout: 120_000 }, async () => {
      const p = await proxy();
      const vault = await store();
      await provide(p, transport, vault.handlers());
      expect((await raw(p.programPort, "PUT", "/vault/a%00b", "with nul")).status).toBe(204);
      expect((await raw(p.programPort, "PUT", "/vault/ab", "without")).status).toBe(204);
      expect(await raw(p.programPort, "GET", "/vault/a%00b")).toEqual({ status: 200, text: "with nul" });
      expect(await raw(p.programPort, "GET", "/vault/ab")).toEqual({ status: 200, text: "without" });
      expect(await vault.get("a\u0000b")).toEqual(text("with nul"));
      expect((await raw(p.programPort, "POST", "/vault/%00/lock?ttl=30")).status).toBe(204);
      expect((await raw(p.programPort, "POST", "/vault/%00/unlock")).status).toBe(204);
      expect((await raw(p.programPort, "DELETE", "/vault/a%00b")).status).toBe(204);
      expect(await raw(p.programPort, "GET", "/vault/a%00b")).toEqual({ status: 404, text: "no value under the key\n" });
    });
  }

  it("a store made with text keys is converted in place: its values and locks are kept", { timeout: 120_000 }, async () => {
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    cleanups.push(() => admin.end());
    const database = `migrate_${process.pid}`;
    await admin.query(`DROP DATABASE IF EXISTS ${database}`);
    await admin.query(`CREATE DATABASE ${database}`);
    const url = postgres.url.replace(/\/postgres$/, `/${database}`);
    const old = new pg.Client({ connectionString: url });
    await old.connect();
    cleanups.push(() => old.end());
    // The tables as the vault made them before keys were bytes.
    await old.query(`CREATE TABLE diverge_vault (namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, PRIMARY KEY (namespace, key))`);
    await old.query(`CREATE TABLE diverge_vault_lock (namespace text NOT NULL, key text NOT NULL, holder text NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (namespace, key))`);
    await old.query(`INSERT INTO diverge_vault VALUES ('old', 'kéy', 'kept'::bytea)`);
    await old.query(`INSERT INTO diverge_vault_lock VALUES ('old', 'held', 'container-a', clock_timestamp() + interval '1 hour')`);
    // Two vaults on it at once: the conversion is made once.
    const [a, b] = await Promise.all([PostgresVault.connect(url, { namespace: "old", holder: "container-a" }), PostgresVault.connect(url, { namespace: "old", holder: "container-b" })]);
    cleanups.push(() => a.close(), () => b.close());
    const [first, second] = await Promise.all([a.get("kéy"), b.get("kéy")]);
    expect(first).toEqual(text("kept"));
    expect(second).toEqual(text("kept"));
    expect((await old.query(`SELECT data_type FROM information_schema.columns WHERE table_name IN ('diverge_vault', 'diverge_vault_lock') AND column_name = 'key'`)).rows).toEqual([{ data_type: "bytea" }, { data_type: "bytea" }]);
    expect(await b.unlock("held")).toEqual({ variant: "Error", message: 'the lock on "held" is not held by this container' });
    expect(await a.unlock("held")).toEqual({ variant: "Done" });
    expect(await a.set("n\u0000l", new Uint8Array([1]))).toEqual({ variant: "Done" });
    expect(await b.get("n\u0000l")).toEqual({ variant: "Present", value: new Uint8Array([1]) });
  });

  it("in the embedded PGlite store too (in memory)", { timeout: 120_000 }, async () => {
    const vault = PostgresVault.embedded(undefined, { namespace: "mem" });
    cleanups.push(() => vault.close());
    expect(await vault.set("a\u0000b", new Uint8Array([7]))).toEqual({ variant: "Done" });
    expect(await vault.get("a\u0000b")).toEqual({ variant: "Present", value: new Uint8Array([7]) });
    expect(await vault.get("ab")).toEqual({ variant: "Missing" });
    expect(await vault.lock("\u0000", 5)).toEqual({ variant: "Done" });
    expect(await vault.unlock("\u0000")).toEqual({ variant: "Done" });
  });
});

describe("the embedded store's errors", () => {
  it("never name the provider's directory, and a store that could not open is tried again", { timeout: 120_000 }, async () => {
    const parent = mkdtempSync(join(tmpdir(), "diverge-vault-unopenable-"));
    cleanups.push(async () => rmSync(parent, { recursive: true, force: true }));
    writeFileSync(join(parent, "file"), "not a directory");
    const vault = PostgresVault.embedded(join(parent, "file", "vault"), { namespace: "n" });
    cleanups.push(() => vault.close());
    const answer = await vault.get("k");
    expect(answer.variant).toBe("Error");
    expect(JSON.stringify(answer)).not.toContain(parent);
    expect(JSON.stringify(answer)).toContain("the embedded vault database could not open");
    expect((await vault.get("k")).variant).toBe("Error");
  });
});

describe("a PUT whose ask is over the proxy's message limit", () => {
  const LIMIT = 64 * 1024;
  for (const transport of TRANSPORTS) {
    it(`is 400 and nothing is asked — ${transport}`, { timeout: 120_000 }, async () => {
      const p = await proxy(LIMIT);
      const asked: string[] = [];
      await provide(p, transport, { vaultSet: ({ key }) => (asked.push(key), { variant: "Done" }) });
      // The body is within what the API reads (the limit less 16); the key takes the ask over one message.
      const key = "k".repeat(200);
      const over = await raw(p.programPort, "PUT", `/vault/${key}`, Buffer.alloc(LIMIT - 16));
      expect(over.status).toBe(400);
      expect(over.text).toMatch(new RegExp(`^the ask is \\d+ bytes, more than one message may carry \\(${LIMIT}\\)\\n$`));
      expect(asked).toEqual([]);
      expect((await raw(p.programPort, "PUT", "/vault/k", Buffer.alloc(LIMIT - 64))).status).toBe(204);
      expect(asked).toEqual(["k"]);
    });
  }
});

async function waitUntil(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** `k` is held by a program of the proxy `p`: the other container's lock waits (it looks, and looks again) until the program unlocks it. */
async function expectHeldByProgram(p: RunningProxy, other: PostgresVault): Promise<void> {
  const before = other.lockAttempts;
  const next = other.lock("k", 30);
  let nextSettled = false;
  void next.then(() => (nextSettled = true));
  await waitUntil(() => other.lockAttempts >= before + 2 || nextSettled);
  expect(nextSettled).toBe(false);
  expect(await raw(p.programPort, "POST", "/vault/k/unlock")).toEqual({ status: 204, text: "" });
  expect(await next).toEqual({ variant: "Done" });
  expect(await other.unlock("k")).toEqual({ variant: "Done" });
}

describe("a lock whose program left while waiting", () => {
  for (const transport of TRANSPORTS) {
    it(`is released as soon as it is granted, never held for its TTL — ${transport}`, { timeout: 120_000 }, async () => {
      const p = await proxy();
      const namespace = `gone-${process.pid}-${transport}`;
      const a = await store("container-a", namespace);
      const b = await store("container-b", namespace);
      const c = await store("container-c", namespace);
      await provide(p, transport, b.handlers());
      expect(await a.lock("k", 3600)).toEqual({ variant: "Done" });
      // The program asks through B; B waits behind A; the program goes away.
      const program = new AbortController();
      const asked = fetch(`http://127.0.0.1:${p.programPort}/vault/k/lock?ttl=3600`, { method: "POST", signal: program.signal }).catch(() => undefined);
      while (b.lockAttempts < 2) await new Promise((resolve) => setTimeout(resolve, 10));
      program.abort();
      await asked;
      expect(await a.unlock("k")).toEqual({ variant: "Done" });
      // C is answered: nobody holds it for 3600 s.
      const third = c.lock("k", 30);
      expect(await settledWithin(third, 20_000)).toBe(true);
      expect(await third).toEqual({ variant: "Done" });
      expect(await b.unlock("k")).toEqual({ variant: "Error", message: 'the lock on "k" is not held by this container' });
      // The proxy still serves the next lock as usual.
      expect(await c.unlock("k")).toEqual({ variant: "Done" });
      expect((await raw(p.programPort, "POST", "/vault/k/lock?ttl=30")).status).toBe(204);
      expect(await c.unlock("k")).toEqual({ variant: "Error", message: 'the lock on "k" is not held by this container' });
    });
  }
});

describe("a departed waiter's release", () => {
  for (const transport of TRANSPORTS) {
    it(`never ends the lock a live program of the same container was given — ${transport}`, { timeout: 120_000 }, async () => {
      const p = await proxy();
      const namespace = `departed-${process.pid}-${transport}`;
      const a = await store("container-a", namespace);
      const b = await store("container-b", namespace);
      // Container A's provider, its lock asks counted as they settle. The first ask (A1's) does not
      // see its program leave until it is granted: the race of a leave with the grant, made certain.
      let lockSettled = 0;
      let asks = 0;
      let tellA1 = () => {};
      const answered = new Promise<void>((resolve) => (tellA1 = resolve));
      // A's releases, seen as they end.
      let unlocked = () => {};
      const released = new Promise<void>((resolve) => (unlocked = resolve));
      const unlock = a.unlock.bind(a);
      a.unlock = (key) => unlock(key).finally(unlocked);
      const handlers = a.handlers();
      await provide(p, transport, {
        ...handlers,
        vaultLock: async (ask, context) => {
          try {
            if (++asks > 1) return await handlers.vaultLock(ask, context);
            const late = new AbortController();
            const answer = await handlers.vaultLock(ask, { ...context, signal: late.signal });
            // Granted after the path closed: nobody received it (told once A2 has been answered).
            if (context.signal.aborted) void answered.then(() => late.abort(new AnswerUndelivered(context.path)));
            return answer;
          } finally {
            lockSettled++;
          }
        },
      });
      expect(await b.lock("k", 3600)).toEqual({ variant: "Done" });
      // A1 waits behind B and leaves.
      const program = new AbortController();
      const first = fetch(`http://127.0.0.1:${p.programPort}/vault/k/lock?ttl=3600`, { method: "POST", signal: program.signal }).catch(() => undefined);
      await waitUntil(() => a.lockAttempts >= 2);
      program.abort();
      await first;
      // A2 of the same container asks, and waits behind B too.
      const attempts = a.lockAttempts;
      const second = raw(p.programPort, "POST", "/vault/k/lock?ttl=3600");
      await waitUntil(() => a.lockAttempts >= attempts + 2);
      expect(await b.unlock("k")).toEqual({ variant: "Done" });
      expect((await second).status).toBe(204);
      // Every lock ask of A has been answered (A1's too, where it was still asked).
      await waitUntil(() => lockSettled >= 2);
      tellA1();
      // A release, were one made, is made now (a hang guard, not an assertion).
      await settledWithin(released, 2000);
      // A2 holds k: B's next lock waits until A2 unlocks it.
      await expectHeldByProgram(p, b);
    });
  }
});

describe("a departed waiter's release, still in flight", () => {
  // On the begin scope the proxy itself releases a grant whose program left. A lock of the same key
  // asked before that release is answered would be granted at once (the container holds the key) and
  // then ended by the release: the program told 204 would hold nothing, and another container could
  // take the key (the families soak saw `unlock … 502 the lock on "k2" is not held by this container`).
  it("is answered before the next lock of the key is asked — multiplexed", { timeout: 120_000 }, async () => {
    const p = await proxy();
    const namespace = `releasing-${process.pid}`;
    const a = await store("container-a", namespace);
    const b = await store("container-b", namespace);
    const events: string[] = [];
    let freeRelease = () => {};
    const releaseHeld = new Promise<void>((resolve) => (freeRelease = resolve));
    const handlers = a.handlers();
    await provide(p, "multiplexed", {
      ...handlers,
      vaultLock: async (ask, context) => {
        events.push("lock asked");
        return handlers.vaultLock(ask, context);
      },
      // The release is held at the provider until the test lets it go.
      vaultUnlock: async (ask, context) => {
        events.push("unlock asked");
        await releaseHeld;
        const answer = await handlers.vaultUnlock(ask, context);
        events.push("unlock answered");
        return answer;
      },
    });
    expect(await b.lock("k", 3600)).toEqual({ variant: "Done" });
    // A program of A waits behind B and leaves; B unlocks; A's grant comes for nobody and is released.
    const program = new AbortController();
    const first = fetch(`http://127.0.0.1:${p.programPort}/vault/k/lock?ttl=3600`, { method: "POST", signal: program.signal }).catch(() => undefined);
    await waitUntil(() => a.lockAttempts >= 2);
    program.abort();
    await first;
    expect(await b.unlock("k")).toEqual({ variant: "Done" });
    await waitUntil(() => events.includes("unlock asked"));
    // Another program of A asks while the release is held: its lock is not asked yet.
    const second = raw(p.programPort, "POST", "/vault/k/lock?ttl=30");
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(events).toEqual(["lock asked", "unlock asked"]);
    freeRelease();
    expect((await second).status).toBe(204);
    expect(events).toEqual(["lock asked", "unlock asked", "unlock answered", "lock asked"]);
    // It holds the key for real: B waits until the program unlocks it.
    await expectHeldByProgram(p, b);
  });
});

describe("the vault's ttl", () => {
  for (const transport of TRANSPORTS) {
    it(`of 0 is refused with 400, the text saying from 1, and not asked — ${transport}`, { timeout: 120_000 }, async () => {
      const p = await proxy();
      const asked: number[] = [];
      await provide(p, transport, { vaultLock: ({ ttl }) => (asked.push(ttl), { variant: "Done" }) });
      expect(await raw(p.programPort, "POST", "/vault/k/lock?ttl=0")).toEqual({ status: 400, text: "ttl must be a number of seconds from 1 to 4294967295\n" });
      expect(await raw(p.programPort, "POST", "/vault/k/lock?ttl=x")).toEqual({ status: 400, text: "ttl must be a number of seconds from 1 to 4294967295\n" });
      expect(asked).toEqual([]);
      expect((await raw(p.programPort, "POST", "/vault/k/lock?ttl=1")).status).toBe(204);
      expect(asked).toEqual([1]);
    });
  }
});

/** A child process ended (SIGKILL) by the cleanup if it is still running. */
function child(command: string, args: string[], env?: NodeJS.ProcessEnv): { process: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const spawned = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: env ?? process.env });
  let output = "";
  spawned.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  spawned.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => spawned.once("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    if (spawned.exitCode === null && spawned.signalCode === null) {
      spawned.kill("SIGKILL");
      await exited;
    }
  });
  return { process: spawned, output: () => output, exited };
}

async function waitFor(what: string, output: () => string, needle: string): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (!output().includes(needle)) {
    if (Date.now() > deadline) throw new Error(`${what}: no "${needle}" in: ${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The store's URL through its Unix socket: reachable from any network namespace. */
const socketUrl = () => `postgres://postgres@${encodeURIComponent(postgres.socketDir)}:${postgres.port}/postgres`;

describe("the lock holder is the container, never the --proxy URL", () => {
  it("two containers each reached as ws://127.0.0.1:14979 (two network namespaces) are two holders", { timeout: 120_000 }, async () => {
    const names = ["a", "b"].map((side) => `diverge-vault-${side}-${process.pid}`);
    const exec = (namespace: string, args: string[]) => spawnSync("ip", ["netns", "exec", namespace, ...args], { encoding: "utf8", timeout: 30_000 });
    for (const name of names) {
      expect(spawnSync("ip", ["netns", "add", name]).status).toBe(0);
      cleanups.push(async () => void spawnSync("ip", ["netns", "del", name]));
      expect(exec(name, ["ip", "link", "set", "lo", "up"]).status).toBe(0);
    }
    // In each namespace: a proxy at the same ports, and `diverge answer` dialling the same URL string.
    for (const name of names) {
      const proxyRun = child("ip", ["netns", "exec", name, process.execPath, PROXY_CLI, "--port", "14979", "--program-port", "14980", "--pg-port", "14981", "--host", "127.0.0.1", "--no-secrets-gate", "--app-port", "9"]);
      await waitFor(`the proxy in ${name}`, proxyRun.output, "14979");
      const answer = child("ip", ["netns", "exec", name, process.execPath, CLI, "answer", "--proxy", "ws://127.0.0.1:14979", "--vault-database-url", socketUrl(), "--vault-namespace", `netns-${process.pid}`]);
      await waitFor(`diverge answer in ${name}`, answer.output, "connected to");
    }
    const call = (name: string, method: string, path: string) => {
      const result = exec(name, ["curl", "-sS", "-X", method, "-w", "\n%{http_code}", `http://127.0.0.1:14980${path}`]);
      const lines = result.stdout.split("\n");
      return { status: Number(lines.pop()), text: lines.join("\n") };
    };
    const [a, b] = names as [string, string];
    expect(call(a, "POST", "/vault/shared-lock/lock?ttl=60").status).toBe(204);
    // B is another container: it cannot unlock A's lock, and its lock waits for A's unlock.
    expect(call(b, "POST", "/vault/shared-lock/unlock")).toEqual({ status: 502, text: 'the lock on "shared-lock" is not held by this container' });
    const waiting = child("ip", ["netns", "exec", b, "curl", "-sS", "-X", "POST", "-w", "\n%{http_code}", "http://127.0.0.1:14980/vault/shared-lock/lock?ttl=60"]);
    expect(await settledWithin(waiting.exited, 1000)).toBe(false);
    expect(call(a, "POST", "/vault/shared-lock/unlock").status).toBe(204);
    expect(await settledWithin(waiting.exited, 20_000)).toBe(true);
    expect(waiting.output().split("\n").pop()).toBe("204");
    expect(call(a, "POST", "/vault/shared-lock/unlock").status).toBe(502);
    expect(call(b, "POST", "/vault/shared-lock/unlock").status).toBe(204);
  });

  it("--container-id: a restarted provider holds what it held; without it, a new run does not", { timeout: 120_000 }, async () => {
    const p = await proxy();
    const namespace = `restart-${process.pid}`;
    const answer = async (...extra: string[]) => {
      const run = child(process.execPath, [CLI, "answer", "--proxy", `ws://127.0.0.1:${p.port}`, "--vault-database-url", postgres.url, "--vault-namespace", namespace, ...extra]);
      await waitFor("diverge answer", run.output, "connected to");
      return run;
    };
    const stop = async (run: { process: ChildProcess; exited: Promise<number | null> }) => {
      run.process.kill("SIGINT");
      expect(await run.exited).toBe(0);
    };
    const call = (method: string, path: string) => raw(p.programPort, method, path);
    const first = await answer("--container-id", "container-7");
    expect((await call("POST", "/vault/kept/lock?ttl=60")).status).toBe(204);
    expect((await call("POST", "/vault/orphan/lock?ttl=60")).status).toBe(204);
    await stop(first);
    const again = await answer("--container-id", "container-7");
    // The same container: refreshed at once, and unlocked.
    expect((await call("POST", "/vault/kept/lock?ttl=60")).status).toBe(204);
    expect((await call("POST", "/vault/kept/unlock")).status).toBe(204);
    await stop(again);
    const anonymous = await answer();
    expect((await call("POST", "/vault/anon/lock?ttl=60")).status).toBe(204);
    await stop(anonymous);
    const next = await answer();
    // A run without --container-id is a holder of its own: the last run's lock is not its to unlock.
    expect(await call("POST", "/vault/anon/unlock")).toEqual({ status: 502, text: 'the lock on "anon" is not held by this container' });
    await stop(next);
  });
});

describe("without --vault-dir", () => {
  for (const command of ["answer", "connect"] as const) {
    it(`\`diverge ${command}\` leaves nothing under the OS temp dir`, { timeout: 120_000 }, async () => {
      const p = await proxy();
      const temp = mkdtempSync(join(tmpdir(), "diverge-vault-tmp-"));
      cleanups.push(async () => rmSync(temp, { recursive: true, force: true }));
      const args = command === "answer" ? ["answer", "--command-exec", "/bin/cat"] : ["connect", "--transport", "paths"];
      const run = child(process.execPath, [CLI, ...args, "--proxy", `ws://127.0.0.1:${p.port}`], { ...process.env, TMPDIR: temp });
      await waitFor(`diverge ${command}`, run.output, "connected to");
      expect(run.output()).toContain("vault in memory, for this run (embedded PGlite");
      expect((await raw(p.programPort, "PUT", "/vault/k", "v")).status).toBe(204);
      expect(await raw(p.programPort, "GET", "/vault/k")).toEqual({ status: 200, text: "v" });
      run.process.kill("SIGINT");
      expect(await run.exited).toBe(0);
      expect(readdirSync(temp).filter((name) => name.startsWith("diverge-vault-"))).toEqual([]);
    });
  }
});
