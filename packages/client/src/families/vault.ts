// The vault family's behaviour on the provider's side: a real store on PostgreSQL (`pg`, given a URL)
// or on embedded PGlite (a directory), answering the five vault exchanges. Its tables are created on
// first use. The namespace says which store (several containers may share one); the holder says which
// container holds a lock. Lock semantics as the reference states them:
// - the answer (`Done`) comes when the lock is held, however long that takes;
// - the time runs from the grant; a re-lock by the holder refreshes it and is answered at once;
// - expiry releases silently; a time of zero is refused; unlock by a non-holder is refused;
// - the holder is the container, so a lock survives every connection ending.
import type { VaultAck, VaultGetAnswer } from "@diverge/codec";
import type { RequestsAskBody } from "@diverge/codec/exchanges";
import type { AnswerContext } from "../exchanges/engine.js";

/** What the vault needs of a database: one parameterised statement at a time. */
export interface SqlClient {
  query(text: string, params?: readonly unknown[]): Promise<{ rows: Record<string, unknown>[]; affected: number }>;
  close(): Promise<void>;
}

export interface VaultOptions {
  /** Which store the keys live in. */
  readonly namespace: string;
  /** Who holds the locks this vault takes: the container it answers for. */
  readonly holder: string;
  /** How often a waiting lock looks again, in milliseconds. Default 50. */
  readonly pollMs?: number;
}

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS diverge_vault (namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, PRIMARY KEY (namespace, key))`,
  `CREATE TABLE IF NOT EXISTS diverge_vault_lock (namespace text NOT NULL, key text NOT NULL, holder text NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (namespace, key))`,
];

export class PostgresVault {
  private ready: Promise<void> | undefined;
  private readonly pollMs: number;

  constructor(
    private readonly sql: SqlClient,
    private readonly options: VaultOptions,
  ) {
    this.pollMs = options.pollMs ?? 50;
  }

  /** A vault on the PostgreSQL at `url` (a `pg` pool of its own). */
  static async connect(url: string, options: VaultOptions): Promise<PostgresVault> {
    const { default: pg } = await import("pg");
    const pool = new pg.Pool({ connectionString: url, max: 8 });
    // An idle client that loses its server must not end the process.
    pool.on("error", () => {});
    return new PostgresVault(
      {
        query: async (text, params) => {
          const result = await pool.query(text, params as unknown[]);
          return { rows: result.rows as Record<string, unknown>[], affected: result.rowCount ?? 0 };
        },
        close: () => pool.end(),
      },
      options,
    );
  }

  /**
   * A vault in an embedded PGlite database kept in `dir`. The database starts on the first ask (it
   * takes seconds), so a provider that is never asked about its vault never waits for it.
   */
  static embedded(dir: string, options: VaultOptions): PostgresVault {
    let opening: Promise<import("@electric-sql/pglite").PGlite> | undefined;
    const db = () => (opening ??= import("@electric-sql/pglite").then(({ PGlite }) => PGlite.create(dir)));
    // PGlite runs one statement at a time; queue them so concurrent asks never interleave.
    let queue: Promise<unknown> = Promise.resolve();
    return new PostgresVault(
      {
        query: (text, params) => {
          const run = queue.then(async () => {
            const result = await (await db()).query<Record<string, unknown>>(text, params as unknown[]);
            return { rows: result.rows, affected: result.affectedRows ?? 0 };
          });
          queue = run.catch(() => {});
          return run;
        },
        close: async () => {
          if (opening) await (await opening).close();
        },
      },
      options,
    );
  }

  async close(): Promise<void> {
    await this.sql.close();
  }

  private schema(): Promise<void> {
    this.ready ??= (async () => {
      for (const statement of SCHEMA) await this.sql.query(statement);
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
      await this.schema();
      const { rows } = await this.sql.query(`SELECT value FROM diverge_vault WHERE namespace = $1 AND key = $2`, [this.options.namespace, key]);
      if (rows.length === 0) return { variant: "Missing" };
      return { variant: "Present", value: new Uint8Array(rows[0]!.value as Uint8Array) };
    } catch (problem) {
      return { variant: "Error", message: messageOf(problem) };
    }
  }

  set(key: string, value: Uint8Array): Promise<VaultAck> {
    return this.ack(() =>
      this.sql.query(`INSERT INTO diverge_vault (namespace, key, value) VALUES ($1, $2, $3) ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value`, [this.options.namespace, key, Buffer.from(value)]),
    );
  }

  delete(key: string): Promise<VaultAck> {
    return this.ack(() => this.sql.query(`DELETE FROM diverge_vault WHERE namespace = $1 AND key = $2`, [this.options.namespace, key]));
  }

  /**
   * Takes the lock, or refreshes it when this holder has it; otherwise waits until it is free or
   * expired. Resolves `undefined` (no answer) when `signal` aborts: the path has ended, and a lock
   * nobody is told about is not taken.
   */
  async lock(key: string, ttl: number, signal?: AbortSignal): Promise<VaultAck | undefined> {
    if (ttl === 0) return { variant: "Error", message: "a lock of zero seconds is refused" };
    try {
      await this.schema();
      for (;;) {
        if (signal?.aborted) return undefined;
        const { rows } = await this.sql.query(
          `INSERT INTO diverge_vault_lock (namespace, key, holder, expires_at) VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
           ON CONFLICT (namespace, key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
           WHERE diverge_vault_lock.holder = excluded.holder OR diverge_vault_lock.expires_at <= clock_timestamp()
           RETURNING holder`,
          [this.options.namespace, key, this.options.holder, ttl],
        );
        if (rows.length > 0) return { variant: "Done" };
        await sleep(this.pollMs, signal);
      }
    } catch (problem) {
      return { variant: "Error", message: messageOf(problem) };
    }
  }

  async unlock(key: string): Promise<VaultAck> {
    try {
      await this.schema();
      const { affected } = await this.sql.query(`DELETE FROM diverge_vault_lock WHERE namespace = $1 AND key = $2 AND holder = $3 AND expires_at > clock_timestamp()`, [this.options.namespace, key, this.options.holder]);
      return affected > 0 ? { variant: "Done" } : { variant: "Error", message: `the lock on ${JSON.stringify(key)} is not held by this container` };
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

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
