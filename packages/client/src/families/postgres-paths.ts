// The program's database connections on the paths transport (`/requests` kind 11, `/postgres/{channel}`):
// the raw handler of `connectProxy` piping each to a real database over TCP. The path is the
// connection; a database that cannot be reached declines it (a clean close before any byte).
import { connect, type Socket } from "node:net";
import type { RequestsAsk } from "@diverge/codec";
import type { RawPath } from "../paths/connect.js";
import { databaseAddress, type DatabaseAddress } from "../multiplexed/postgres.js";

/** Bytes queued toward the proxy above which the database is no longer read. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
const POLL_MS = 5;

export interface PostgresPathsOptions {
  /** Told about a database that could not be reached (the connection was declined). */
  readonly onError?: (error: Error) => void;
}

/** A `raw` handler for `connectProxy` that pipes every database connection to `target` (resolved on each). */
export function postgresOverPaths(target: string | DatabaseAddress | (() => Promise<string | DatabaseAddress>), options: PostgresPathsOptions = {}): (ask: RequestsAsk, path: RawPath) => Promise<void> {
  return async (ask, path) => {
    if (ask.kind !== "Postgres") return path.close();
    const early: Uint8Array[] = [];
    let database: Socket | undefined;
    // What the program wrote arrives as soon as the path opens: kept until the database answers the dial.
    path.onData((bytes) => {
      if (database) database.write(bytes);
      else early.push(bytes);
    });
    let address: DatabaseAddress;
    try {
      address = databaseAddress(typeof target === "function" ? await target() : target);
      database = await new Promise<Socket>((resolve, reject) => {
        const socket = connect(address);
        socket.once("connect", () => resolve(socket));
        socket.once("error", reject);
      });
    } catch (problem) {
      options.onError?.(problem instanceof Error ? problem : new Error(String(problem)));
      // Declined: a clean close before any byte.
      return path.close();
    }
    const db = database;
    db.setNoDelay(true);
    db.on("error", () => db.destroy());
    for (const bytes of early.splice(0)) db.write(bytes);
    db.on("data", (chunk: Buffer) => {
      if (!path.send(chunk)) return db.destroy();
      if (path.bufferedAmount > HIGH_WATER && !db.isPaused()) {
        db.pause();
        const timer = setInterval(() => {
          if (path.bufferedAmount <= LOW_WATER || db.destroyed) {
            clearInterval(timer);
            db.resume();
          }
        }, POLL_MS);
      }
    });
    // The database hung up: the connection ends, the path closes cleanly.
    db.once("close", () => path.close());
    // The proxy closed the path (the driver hung up): the database connection ends.
    await path.ended;
    db.end();
  };
}
