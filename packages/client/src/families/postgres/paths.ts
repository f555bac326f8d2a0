// The program's database connections on the paths transport (`/requests` kind 11, `/postgres/{channel}`):
// the raw handler of `connectProxy` piping each to a real database over TCP. The path is the
// connection; a database that cannot be reached declines it (a clean close before any byte).
import { connect, type Socket } from "node:net";
import type { RequestsAsk } from "@diverge/codec";
import { BacklogHold } from "@diverge/multiplexer";
import type { RawPath } from "../../paths/connect.js";
import { databaseAddress, type DatabaseAddress } from "./address.js";

/**
 * Bytes queued toward the proxy above which the database is no longer read; and bytes from the
 * program waiting for the database above which the path is no longer read (the path is this
 * connection's alone: pausing it stalls nothing else). Both resume at LOW_WATER.
 */
export const HIGH_WATER = 1024 * 1024;
export const LOW_WATER = 256 * 1024;
const POLL_MS = 5;

export interface PostgresPathsOptions {
  /** Told about a database that could not be reached (the connection was declined). */
  readonly onError?: (error: Error) => void;
  /** Filled in as connections are carried (for reports and tests). */
  readonly stats?: PostgresPathsStats;
}

/** What the raw handler's buffers held, across every connection it carried. */
export interface PostgresPathsStats {
  /** The most bytes from the program ever waiting for one database socket. */
  maxDatabaseBuffered: number;
  /** Times a path was no longer read because its database had HIGH_WATER waiting. */
  pathPauses: number;
}

/** A `raw` handler for `connectProxy` that pipes every database connection to `target` (resolved on each). */
export function postgresOverPaths(target: string | DatabaseAddress | (() => Promise<string | DatabaseAddress>), options: PostgresPathsOptions = {}): (ask: RequestsAsk, path: RawPath) => Promise<void> {
  return async (ask, path) => {
    if (ask.variant !== "Postgres") return path.close();
    const early: Uint8Array[] = [];
    let earlyBytes = 0;
    let database: Socket | undefined;
    // What the program wrote, waiting for the database (or, before it answers the dial, in `early`):
    // past HIGH_WATER the path is no longer read until it is down to LOW_WATER.
    const stats = options.stats;
    const hold = new BacklogHold(
      () => {
        if (stats) stats.pathPauses++;
        return path.pauseIncoming();
      },
      HIGH_WATER,
      LOW_WATER,
    );
    const waiting = (bytes: number) => {
      if (stats && bytes > stats.maxDatabaseBuffered) stats.maxDatabaseBuffered = bytes;
      hold.update(bytes);
    };
    const flushed = () => {
      if (database && !database.destroyed) hold.update(database.writableLength);
    };
    path.onData((bytes) => {
      if (database) {
        if (database.destroyed) return;
        database.write(bytes, flushed);
        waiting(database.writableLength);
      } else {
        early.push(bytes);
        earlyBytes += bytes.length;
        waiting(earlyBytes);
      }
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
      hold.dispose();
      // Declined: a clean close before any byte.
      return path.close();
    }
    const db = database;
    db.setNoDelay(true);
    db.on("error", () => db.destroy());
    for (const bytes of early.splice(0)) db.write(bytes, flushed);
    hold.update(db.writableLength);
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
    db.once("close", () => {
      hold.dispose();
      path.close();
    });
    // The proxy closed the path (the driver hung up): the database connection ends.
    await path.ended;
    hold.dispose();
    db.end();
  };
}
