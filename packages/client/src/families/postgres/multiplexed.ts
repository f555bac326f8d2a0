// The postgres pair on the multiplexed connection: the proxy announces a program's database
// connection (proxy-opened tag 0), the provider opens its half with the same id (provider-opened tag 0).
// `pipePostgres` is the ready helper: the provider's half joined to a real database over TCP, bytes
// straight through both ways, with bounded buffering.
import { connect, type Socket } from "node:net";
import { BacklogHold } from "@diverge/multiplexer";
import type { AnnouncedConnection, PairFamily } from "../../multiplexed/pairs.js";
import { databaseAddress, type DatabaseAddress } from "./address.js";

/** Send-buffer level of the proxy connection above which the database socket is paused. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
/**
 * Bytes from the driver the database socket may hold unwritten before this pair pauses reading the
 * whole connection (every channel waits) until they drain to a quarter: below it, a database that
 * reads slowly stalls no other channel.
 */
export const DATABASE_BUDGET = 8 * 1024 * 1024;

/**
 * Accepts `connection` and pipes it to the database at `target`. Resolves once both directions have
 * ended. When the database cannot be reached the connection is declined (the driver sees its socket
 * closed) and the promise rejects.
 */
export interface PipePostgresOptions {
  /** Bytes from the driver the database socket may hold before this pair pauses the connection. Default DATABASE_BUDGET (8 MiB). */
  readonly budgetBytes?: number;
}

export async function pipePostgres(connection: AnnouncedConnection, target: string | DatabaseAddress, options: PipePostgresOptions = {}): Promise<void> {
  const database: Socket = connect(databaseAddress(target));
  try {
    await new Promise<void>((resolve, reject) => {
      database.once("connect", resolve);
      database.once("error", reject);
    });
  } catch (error) {
    connection.decline();
    throw error;
  }
  database.setNoDelay(true);
  // What the driver wrote waits in the database socket's buffer, this channel's own, up to the budget;
  // past it the connection is paused for this pair until the database has taken most of it.
  let hold: BacklogHold | undefined;
  const flushed = () => hold?.update(database.writableLength);
  const finished = new Promise<void>((resolve) => database.once("close", () => resolve()));
  const half = connection.accept({
    data: (bytes) => {
      if (database.destroyed) return;
      database.write(bytes, flushed);
      hold?.update(database.writableLength);
    },
    end: () => database.end(),
  });
  database.on("data", (chunk: Buffer) => {
    half.send(chunk);
    if (half.bufferedAmount > HIGH_WATER && !database.isPaused()) {
      database.pause();
      void half.drained(LOW_WATER).then(() => {
        if (!database.destroyed) database.resume();
      });
    }
  });
  database.once("end", () => half.end());
  database.on("error", () => database.destroy());
  const budget = Math.max(4, options.budgetBytes ?? DATABASE_BUDGET);
  hold = new BacklogHold(() => half.pauseIncoming(), budget, Math.floor(budget / 4));
  database.once("close", () => {
    hold?.dispose();
    half.end();
  });
  await finished;
}

/** Where the program's database connections go on the multiplexed connection (part of `OpenContainerOptions`). */
export interface PostgresPairOptions {
  /**
   * Where the program's database connections go: a `postgres://` URL or `{host, port}` (e.g. an
   * embedded PGlite behind `@electric-sql/pglite-socket`). Every announced database connection is
   * piped there; a failure is a `pairFailed` event. Ignored when `onPostgres` is given.
   */
  readonly database?: string | DatabaseAddress;
  /**
   * Called for every database connection the proxy announces; without it (and without `database`)
   * each is declined. What it throws or its promise rejects with is a `pairFailed` event.
   */
  readonly onPostgres?: (connection: AnnouncedConnection) => unknown;
}

/** The postgres pair for the pair engine: announced by `Postgres`, answered by `onPostgres`, else piped to `database`. */
export const postgresPair: PairFamily<PostgresPairOptions> = {
  kind: "postgres",
  announcedBy: "Postgres",
  half: (id) => ({ variant: "Postgres", connection_id: id }),
  handler: (options) => options.onPostgres ?? databaseHandler(options.database),
  noHandler: "no onPostgres handler and no database option",
};

function databaseHandler(database: string | DatabaseAddress | undefined): ((connection: AnnouncedConnection) => unknown) | undefined {
  if (database === undefined) return undefined;
  return (connection) => pipePostgres(connection, database);
}
