// Postgres over the paths transport (paths.md §6): a database connection of the program, made while
// no provider has begun tools on `/`, is announced on `/requests` (kind 11) and carried on
// `/postgres/{channel}`: raw pgwire both ways, the path is the connection. Bytes the driver wrote
// before the path opened wait (unread) and go first; a clean close before any byte declines it;
// `/requests` ending before the path opened ends that connection; nothing is ever asked again.
import type { Say } from "@diverge/multiplexer/log";
import type { Socket } from "node:net";
import { encodeRequestsAsk } from "@diverge/codec";
import { BacklogHold } from "@diverge/multiplexer";
import type { AnswerPath, AskBoard, PathEnding } from "../../paths/board.js";

/**
 * Bytes in flight toward the provider above which the driver is no longer read; and bytes from the
 * provider the driver has left unread above which the path is no longer read (TCP backpressure on the
 * provider; the path is this connection's alone). Both resume at LOW_WATER.
 */
export const HIGH_WATER = 1024 * 1024;
export const LOW_WATER = 256 * 1024;

export interface PostgresOverRequestsStats {
  /** Connections announced on `/requests`. */
  announced: number;
  /** Connections whose path opened. */
  carried: number;
  /** Declined (a clean close before any byte), or ended with `/requests` before their path opened. */
  declined: number;
  lost: number;
  /** The most bytes ever waiting unread in one driver's socket, and in flight toward the provider. */
  maxDriverBuffered: number;
  maxInFlight: number;
  /** Times a path was no longer read because its driver left HIGH_WATER unread. */
  pathPauses: number;
}

export class PostgresOverRequests {
  readonly stats: PostgresOverRequestsStats = { announced: 0, carried: 0, declined: 0, lost: 0, maxDriverBuffered: 0, maxInFlight: 0, pathPauses: 0 };
  private readonly availability = new Set<() => void>();

  constructor(
    private readonly board: AskBoard,
    private readonly log: Say,
  ) {
    board.onEvent((event) => {
      if (event.type !== "requestsOpened") return;
      for (const listener of [...this.availability]) listener();
    });
  }

  /** Whether `/requests` is open now, so a connection can be announced at once. */
  get available(): boolean {
    return this.board.requestsOpen;
  }

  /** Called whenever a `/requests` connection opens. Returns the removal. */
  onAvailable(listener: () => void): () => void {
    this.availability.add(listener);
    return () => this.availability.delete(listener);
  }

  /** Announces the driver's connection on `/requests` and carries it on its path. The socket is paused until then. */
  carry(driver: Socket): void {
    driver.pause();
    let opened = false;
    this.stats.announced++;
    this.board.ask({
      kind: "Postgres",
      encode: (channel) => encodeRequestsAsk({ channel, variant: "Postgres" }),
      announced: (channel) => this.log(`database connection announced on /requests (channel ${channel})`),
      refused: () => driver.destroy(),
      // The driver hung up before the provider opened the path: the ask is not sent.
      withdrawn: () => driver.destroyed,
      lostWithConnection: () => {
        // `/requests` ended before the path opened: that connection has ended, and is never asked again.
        this.stats.lost++;
        this.log("/requests ended before a database connection's path opened: that connection is closed");
        driver.destroy();
        return false;
      },
      opened: (path) => {
        opened = true;
        this.stats.carried++;
        return this.pipe(driver, path);
      },
    });
    driver.once("close", () => {
      if (!opened) driver.destroy();
    });
  }

  private pipe(driver: Socket, path: AnswerPath): { message(bytes: Uint8Array): void; ended(ending: PathEnding): void } {
    let received = 0;
    let inFlight = 0;
    let ended = false;
    const drained = () => {
      if (inFlight <= LOW_WATER && driver.isPaused() && !ended) driver.resume();
    };
    driver.on("data", (chunk: Buffer) => {
      inFlight += chunk.length;
      if (inFlight > this.stats.maxInFlight) this.stats.maxInFlight = inFlight;
      path.send(chunk, () => {
        inFlight -= chunk.length;
        drained();
      });
      if (inFlight > HIGH_WATER) driver.pause();
    });
    // What the provider sends waits in the driver's socket; past HIGH_WATER the path is not read.
    const hold = new BacklogHold(
      () => {
        this.stats.pathPauses++;
        path.pause();
        return () => path.resume();
      },
      HIGH_WATER,
      LOW_WATER,
    );
    const flushed = () => {
      if (!ended && !driver.destroyed) hold.update(driver.writableLength);
    };
    // The driver hung up: the path closes cleanly.
    driver.once("end", () => path.close());
    driver.once("close", () => {
      hold.dispose();
      path.close();
    });
    // What the driver wrote before the path opened comes first: it was left unread until now.
    driver.resume();
    return {
      message: (bytes) => {
        received += bytes.length;
        if (driver.destroyed) return;
        driver.write(bytes, flushed);
        const waiting = driver.writableLength;
        if (waiting > this.stats.maxDriverBuffered) this.stats.maxDriverBuffered = waiting;
        hold.update(waiting);
      },
      ended: (ending) => {
        ended = true;
        hold.dispose();
        if (received === 0 && ending.how === "clean") {
          this.stats.declined++;
          this.log("a database connection was declined by the provider (its path closed before any byte)");
        }
        // The provider's close ends the connection: the driver sees the database hang up.
        if (ending.how === "clean") driver.end();
        else driver.destroy();
      },
    };
  }
}
