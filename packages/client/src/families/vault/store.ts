// The vault family's behaviour on the provider's side: a real store on PostgreSQL (`pg`, given a URL)
// or on embedded PGlite (a directory), answering the five vault exchanges. Its tables are created on
// first use. The namespace says which store (several containers may share one); the holder says which
// container holds a lock. Lock semantics as the reference states them:
// - the answer (`Done`) comes when the lock is held, however long that takes;
// - the time runs from the grant; a re-lock by the holder refreshes it and is answered at once;
// - expiry releases silently; a time of zero is refused; unlock by a non-holder is refused;
// - the holder is the container, so a lock survives every connection ending.
// A waiting lock does not poll: an unlock sends a PostgreSQL notification (NOTIFY on one channel,
// the namespace and key as its payload) and every vault LISTENing there looks again at once. An
// expiring lock sends nothing, so a waiter also looks again when the holder's time runs out, and at
// the latest after `recheckMs` (a lost notification, or a listener that could not connect).
import { createHash, randomUUID } from "node:crypto";
import type { VaultAck, VaultGetAnswer } from "@diverge/codec";
import type { RequestsAskBody } from "@diverge/codec/exchanges";
import { AnswerUndelivered, type AnswerContext } from "../../exchanges/engine.js";

/** What the vault needs of a database: one parameterised statement at a time. */
export interface SqlClient {
  /**
   * Runs `text`. With a `name`, the statement may be prepared once per connection under it and
   * only bound and executed after (`pg`'s named statements): each name is always given the same text.
   */
  query(text: string, params?: readonly unknown[], name?: string): Promise<{ rows: Record<string, unknown>[]; affected: number }>;
  /**
   * LISTENs on `channel`: `notified` is called with each notification's payload. Resolves once the
   * LISTEN is in effect, with the function that stops it. Without it, a waiting lock only looks again
   * on its timer. `lost` is called if the LISTEN ends by itself (its connection dropped).
   */
  listen?(channel: string, notified: (payload: string) => void, lost?: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface VaultOptions {
  /** Which store the keys live in. */
  readonly namespace: string;
  /**
   * Who holds the locks this vault takes: the container it answers for (`diverge connect
   * --container-id`). Default a random id of this vault's own: its locks are then held by this vault
   * alone, and one left held when it ends (a provider restarted) is nobody's until its time runs
   * out. Give the container's own id for a restarted provider to hold, refresh and unlock what it held.
   * Never the proxy's address: two containers reached at one address are two holders.
   */
  readonly holder?: string;
  /**
   * The longest a waiting lock goes without looking again, in milliseconds, when no notification
   * comes (an unlock notifies at once; an expiry is looked at when it is due). Default 1000.
   */
  readonly recheckMs?: number;
  /** @deprecated The name `recheckMs` had when waiting locks polled; used when `recheckMs` is not given. */
  readonly pollMs?: number;
}

/**
 * The channel unlocks NOTIFY and waiting locks LISTEN on; the payload is the SHA-256 (hex) of the
 * JSON of `[namespace, key]`: a notification carries at most 8000 bytes, and a key may be 65535.
 */
const LOCK_CHANNEL = "diverge_vault_lock_released";

/**
 * The tables, made (or brought up to date) in one statement under an advisory lock, so providers
 * sharing a store never race each other's first use. Keys are `bytea`, the UTF-8 bytes of the key:
 * PostgreSQL's text cannot hold U+0000, which a key may contain. A store made with text keys (before
 * 2.3.0's hardening) is converted in place, each key to its UTF-8 bytes.
 */
const SCHEMA = `DO $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('diverge_vault schema'));
  CREATE TABLE IF NOT EXISTS diverge_vault (namespace text NOT NULL, key bytea NOT NULL, value bytea NOT NULL, PRIMARY KEY (namespace, key));
  CREATE TABLE IF NOT EXISTS diverge_vault_lock (namespace text NOT NULL, key bytea NOT NULL, holder text NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (namespace, key));
  IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'diverge_vault' AND column_name = 'key' AND data_type = 'text') THEN
    ALTER TABLE diverge_vault ALTER COLUMN key TYPE bytea USING convert_to(key, 'UTF8');
  END IF;
  IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'diverge_vault_lock' AND column_name = 'key' AND data_type = 'text') THEN
    ALTER TABLE diverge_vault_lock ALTER COLUMN key TYPE bytea USING convert_to(key, 'UTF8');
  END IF;
END $$`;

/** A key as the store keeps it: its UTF-8 bytes. */
const keyBytes = (key: string): Buffer => Buffer.from(key, "utf8");

/**
 * The vault's statements, each prepared once per pooled connection under its name (parsed and
 * planned once, not on every ask). The names carry a version: a changed text gets a new name.
 */
const STATEMENTS = {
  get: { name: "diverge_vault_get_1", text: `SELECT value FROM diverge_vault WHERE namespace = $1 AND key = $2` },
  set: { name: "diverge_vault_set_1", text: `INSERT INTO diverge_vault (namespace, key, value) VALUES ($1, $2, $3) ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value` },
  delete: { name: "diverge_vault_delete_1", text: `DELETE FROM diverge_vault WHERE namespace = $1 AND key = $2` },
  lock: {
    name: "diverge_vault_lock_1",
    text: `WITH taken AS (
             INSERT INTO diverge_vault_lock (namespace, key, holder, expires_at) VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
             ON CONFLICT (namespace, key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
             WHERE diverge_vault_lock.holder = excluded.holder OR diverge_vault_lock.expires_at <= clock_timestamp()
             RETURNING (xmax = 0) AS inserted),
           prior AS (SELECT holder = $3 AND expires_at > clock_timestamp() AS held FROM diverge_vault_lock WHERE namespace = $1 AND key = $2)
           SELECT true AS taken, 0::float8 AS wait_ms, (inserted OR NOT EXISTS (SELECT 1 FROM prior WHERE held)) AS fresh FROM taken
           UNION ALL
           SELECT false, extract(epoch FROM expires_at - clock_timestamp()) * 1000, false FROM diverge_vault_lock
             WHERE namespace = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM taken)`,
  },
  // The release and its notification in one statement: every vault LISTENing looks again.
  unlock: {
    name: "diverge_vault_unlock_1",
    text: `WITH released AS (DELETE FROM diverge_vault_lock WHERE namespace = $1 AND key = $2 AND holder = $3 AND expires_at > clock_timestamp() RETURNING key)
         SELECT pg_notify('${LOCK_CHANNEL}', $4) FROM released`,
  },
} as const;

export class PostgresVault {
  private ready: Promise<void> | undefined;
  /** Once the tables are known to be there: an ask then goes straight to its statement. */
  private schemaMade = false;
  private readonly recheckMs: number;
  /** The LISTEN, once a lock has had to wait; undefined again when it failed (the next wait retries). */
  private listening: Promise<(() => Promise<void>) | undefined> | undefined;
  /** The waiting locks of this vault, by the notification payload that wakes them. */
  private readonly waiters = new Map<string, Set<() => void>>();
  private closed = false;
  /**
   * The grants this vault has made, by key: a count each grant takes the next of. A release for an
   * ask whose answer reached nobody is made only when no other grant of the key followed it (the
   * holder is the container: one unlock ends every program's hold of the key).
   */
  private readonly grants = new Map<string, number>();
  /** By key, the takes and releases in progress: one at a time, so a release never passes a take made before it. */
  private readonly keyTurns = new Map<string, Promise<unknown>>();

  /** Runs `step` after every take or release of `key` before it. */
  private inTurn<T>(key: string, step: () => Promise<T>): Promise<T> {
    const run = (this.keyTurns.get(key) ?? Promise.resolve()).then(step);
    const tail = run.catch(() => {});
    this.keyTurns.set(key, tail);
    void tail.then(() => {
      if (this.keyTurns.get(key) === tail) this.keyTurns.delete(key);
    });
    return run;
  }
  /** Lock attempts made so far (each one statement): how often waiting locks looked. */
  lockAttempts = 0;

  /** Who holds the locks this vault takes: `options.holder`, else a random id of its own. */
  readonly holder: string;

  constructor(
    private readonly sql: SqlClient,
    private readonly options: VaultOptions,
  ) {
    this.recheckMs = options.recheckMs ?? options.pollMs ?? 1000;
    this.holder = options.holder ?? `provider-${randomUUID()}`;
  }

  /** What an unlock of `key` notifies, and what wakes the waiters of `key`. */
  private wakePayload(key: string): string {
    return createHash("sha256").update(JSON.stringify([this.options.namespace, key])).digest("hex");
  }

  /** A vault on the PostgreSQL at `url` (a `pg` pool of its own). */
  static async connect(url: string, options: VaultOptions): Promise<PostgresVault> {
    const { default: pg } = await import("pg");
    const pool = new pg.Pool({ connectionString: url, max: 8 });
    // An idle client that loses its server must not end the process.
    pool.on("error", () => {});
    const listeners = new Set<import("pg").Client>();
    return new PostgresVault(
      {
        query: async (text, params, name) => {
          const result = await (name === undefined ? pool.query(text, params as unknown[]) : pool.query({ name, text, values: params as unknown[] }));
          return { rows: result.rows as Record<string, unknown>[], affected: result.rowCount ?? 0 };
        },
        // A connection of its own (a pooled one would be given back, and its LISTEN with it).
        listen: async (channel, notified, lost) => {
          const client = new pg.Client({ connectionString: url });
          client.on("error", () => {});
          client.once("end", () => {
            if (listeners.has(client)) lost?.();
          });
          client.on("notification", (message) => {
            if (message.channel === channel) notified(message.payload ?? "");
          });
          listeners.add(client);
          const stop = async () => {
            listeners.delete(client);
            await client.end().catch(() => {});
          };
          try {
            await client.connect();
            await client.query(`LISTEN ${channel}`);
          } catch (problem) {
            await stop();
            throw problem;
          }
          return stop;
        },
        close: async () => {
          await Promise.all([...listeners].map((client) => client.end().catch(() => {})));
          await pool.end();
        },
      },
      options,
    );
  }

  /**
   * A vault in an embedded PGlite database kept in `dir`, or in memory when no `dir` is given (it
   * lasts as long as the vault, and leaves nothing behind). The database starts on the first ask (it
   * takes seconds), so a provider that is never asked about its vault never waits for it.
   */
  static embedded(dir: string | undefined, options: VaultOptions): PostgresVault {
    let opening: Promise<import("@electric-sql/pglite").PGlite> | undefined;
    const db = () =>
      (opening ??= import("@electric-sql/pglite")
        .then(({ PGlite }) => (dir === undefined ? PGlite.create() : PGlite.create(dir)))
        .catch((problem: unknown) => {
          // Tried again on the next ask; the program is told why without the provider's own path.
          opening = undefined;
          const message = problem instanceof Error ? problem.message : String(problem);
          throw new Error(`the embedded vault database could not open: ${dir === undefined ? message : message.split(dir).join("<vault dir>")}`);
        }));
    // PGlite runs one statement at a time; queue them so concurrent asks never interleave.
    let queue: Promise<unknown> = Promise.resolve();
    const serial = <T>(step: () => Promise<T>): Promise<T> => {
      const run = queue.then(step);
      queue = run.catch(() => {});
      return run;
    };
    return new PostgresVault(
      {
        query: (text, params) =>
          serial(async () => {
            const result = await (await db()).query<Record<string, unknown>>(text, params as unknown[]);
            return { rows: result.rows, affected: result.affectedRows ?? 0 };
          }),
        listen: (channel, notified) =>
          serial(async () => {
            const stop = await (await db()).listen(channel, notified);
            return () => serial(() => stop());
          }),
        close: async () => {
          if (opening) await (await opening).close();
        },
      },
      options,
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const wakes of this.waiters.values()) for (const wake of wakes) wake();
    const listening = this.listening;
    this.listening = undefined;
    const stop = await listening?.catch(() => undefined);
    await stop?.().catch(() => {});
    await this.sql.close();
  }

  /** LISTENs for released locks, once; a LISTEN that fails, or whose connection drops, is made again by the next wait. */
  private listen(): Promise<unknown> {
    if (!this.sql.listen || this.closed) return Promise.resolve();
    if (this.listening) return this.listening;
    const listening: Promise<(() => Promise<void>) | undefined> = this.sql
      .listen(
        LOCK_CHANNEL,
        (payload) => {
          for (const wake of this.waiters.get(payload) ?? []) wake();
        },
        () => {
          // The connection dropped: forget this LISTEN, and let every waiter look again now.
          if (this.listening === listening) this.listening = undefined;
          for (const wakes of this.waiters.values()) for (const wake of wakes) wake();
        },
      )
      .catch(() => {
        if (this.listening === listening) this.listening = undefined;
        return undefined;
      });
    this.listening = listening;
    return listening;
  }

  private schema(): Promise<void> {
    this.ready ??= (async () => {
      await this.sql.query(SCHEMA);
      this.schemaMade = true;
    })().catch((problem: unknown) => {
      this.ready = undefined;
      throw problem;
    });
    return this.ready;
  }

  /** The five handlers, for `ProviderHandlers`. A database failure is the answer's error message. */
  handlers() {
    return {
      vaultGet: (ask: RequestsAskBody<"VaultGet">) => this.get(ask.key),
      vaultSet: (ask: RequestsAskBody<"VaultSet">) => this.set(ask.key, ask.value),
      vaultDelete: (ask: RequestsAskBody<"VaultDelete">) => this.delete(ask.key),
      vaultLock: (ask: RequestsAskBody<"VaultLock">, context: AnswerContext) => this.lock(ask.key, ask.ttl, context.signal),
      vaultUnlock: (ask: RequestsAskBody<"VaultUnlock">) => this.unlock(ask.key),
    };
  }

  async get(key: string): Promise<VaultGetAnswer> {
    try {
      // A read takes no lock and no transaction: one prepared statement on a pooled connection.
      if (!this.schemaMade) await this.schema();
      const { rows } = await this.sql.query(STATEMENTS.get.text, [this.options.namespace, keyBytes(key)], STATEMENTS.get.name);
      if (rows.length === 0) return { variant: "Missing" };
      return { variant: "Present", value: new Uint8Array(rows[0]!.value as Uint8Array) };
    } catch (problem) {
      return { variant: "Error", message: messageOf(problem) };
    }
  }

  set(key: string, value: Uint8Array): Promise<VaultAck> {
    return this.ack(() =>
      this.sql.query(STATEMENTS.set.text, [this.options.namespace, keyBytes(key), Buffer.from(value)], STATEMENTS.set.name),
    );
  }

  delete(key: string): Promise<VaultAck> {
    return this.ack(() => this.sql.query(STATEMENTS.delete.text, [this.options.namespace, keyBytes(key)], STATEMENTS.delete.name));
  }

  /**
   * Takes the lock, or refreshes it when this holder has it; otherwise waits until it is free or
   * expired. Resolves `undefined` (no answer) when `signal` aborts: the path has ended, and a lock
   * nobody is told about is not taken.
   */
  async lock(key: string, ttl: number, signal?: AbortSignal): Promise<VaultAck | undefined> {
    if (ttl === 0) return { variant: "Error", message: "a lock of zero seconds is refused" };
    const payload = this.wakePayload(key);
    let woken = false;
    let wake: (() => void) | undefined;
    const onWake = () => {
      woken = true;
      wake?.();
    };
    let registered = false;
    try {
      await this.schema();
      for (;;) {
        if (signal?.aborted || this.closed) return undefined;
        woken = false;
        // Taken when free, expired, or held by this container (a refresh); otherwise how long until
        // the holder's time runs out, in milliseconds.
        this.lockAttempts++;
        let grant = 0;
        const { rows } = await this.inTurn(key, async () => {
          const result = await this.sql.query(STATEMENTS.lock.text, [this.options.namespace, keyBytes(key), this.holder, ttl], STATEMENTS.lock.name);
          if (result.rows.some((row) => row.taken === true)) this.grants.set(key, (grant = (this.grants.get(key) ?? 0) + 1));
          return result;
        });
        const taken = rows.find((row) => row.taken === true);
        if (taken) {
          // Released for an ask nobody was told of only when this ask took the hold itself (it was
          // not already the container's: a re-lock) and no other grant of the key came after it.
          const release = () =>
            this.inTurn(key, async () => {
              if (taken.fresh === true && this.grants.get(key) === grant) await this.unlock(key);
            });
          // Taken just as the path ended: nobody is told, so nobody keeps it.
          if (signal?.aborted) {
            await release();
            return undefined;
          }
          // Taken, but the answer came after its path had closed: nobody was told, so nobody keeps it.
          signal?.addEventListener(
            "abort",
            () => {
              if (signal.reason instanceof AnswerUndelivered) void release();
            },
            { once: true },
          );
          return { variant: "Done" };
        }
        if (!registered) {
          // Listen before looking again, so a release between the two is not missed.
          registered = true;
          let wakes = this.waiters.get(payload);
          if (!wakes) this.waiters.set(payload, (wakes = new Set()));
          wakes.add(onWake);
          await this.listen();
          continue;
        }
        if (woken) continue;
        // A LISTEN whose connection dropped is made again (its first notifications may be missed: the timer covers them).
        if (!this.listening) void this.listen();
        const due = Number(rows[0]?.wait_ms ?? 0);
        // A little past the expiry, so the next attempt finds it expired.
        const ms = Math.min(this.recheckMs, Math.max(0, Math.ceil(due)) + 5);
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener("abort", done);
            wake = undefined;
            resolve();
          };
          const timer = setTimeout(done, ms);
          wake = done;
          signal?.addEventListener("abort", done, { once: true });
          if (woken || signal?.aborted) done();
        });
      }
    } catch (problem) {
      return { variant: "Error", message: messageOf(problem) };
    } finally {
      const wakes = this.waiters.get(payload);
      wakes?.delete(onWake);
      if (wakes?.size === 0) this.waiters.delete(payload);
    }
  }

  async unlock(key: string): Promise<VaultAck> {
    try {
      await this.schema();
      const { rows } = await this.sql.query(STATEMENTS.unlock.text, [this.options.namespace, keyBytes(key), this.holder, this.wakePayload(key)], STATEMENTS.unlock.name);
      return rows.length > 0 ? { variant: "Done" } : { variant: "Error", message: `the lock on ${JSON.stringify(key)} is not held by this container` };
    } catch (problem) {
      return { variant: "Error", message: messageOf(problem) };
    }
  }

  private async ack(run: () => Promise<unknown>): Promise<VaultAck> {
    try {
      await this.schema();
      await run();
      return { variant: "Done" };
    } catch (problem) {
      return { variant: "Error", message: messageOf(problem) };
    }
  }
}

function messageOf(problem: unknown): string {
  return problem instanceof Error ? problem.message : String(problem);
}
