// Postgres over the paths transport (paths.md §6): a database connection of the program, made while
// no provider has begun tools on `/`, is announced on `/requests` (kind 11) and carried on
// `/postgres/{channel}`: raw pgwire both ways, the path is the connection. Bytes the driver wrote
// before the path opened wait (unread) and go first; a clean close before any byte declines it;
// `/requests` ending before the path opened ends that connection; nothing is ever asked again.
import type { Socket } from "node:net";
import { encodeRequestsAsk } from "@diverge/codec";
import type { AnswerPath, AskBoard, PathEnding } from "./board.js";

/** Bytes in flight toward the provider above which the driver is no longer read. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;

export interface PostgresOverRequestsStats {
  /** Connections announced on `/requests`. */
  announced: number;
  /** Connections whose path opened. */
  carried: number;
  /** Declined (a clean close before any byte), or ended with `/requests` before their path opened. */
  declined: number;
  lost: number;
}

export class PostgresOverRequests {
  readonly stats: PostgresOverRequestsStats = { announced: 0, carried: 0, declined: 0, lost: 0 };
  private readonly availability = new Set<() => void>();

  constructor(
    private readonly board: AskBoard,
    private readonly log: (line: string) => void,
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
      encode: (channel) => encodeRequestsAsk({ channel, kind: "Postgres" }),
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
      path.send(chunk, () => {
        inFlight -= chunk.length;
        drained();
      });
      if (inFlight > HIGH_WATER) driver.pause();
    });
    // The driver hung up: the path closes cleanly.
    driver.once("end", () => path.close());
    driver.once("close", () => path.close());
    driver.on("drain", () => path.resume());
    // What the driver wrote before the path opened comes first: it was left unread until now.
    driver.resume();
    return {
      message: (bytes) => {
        received += bytes.length;
        if (!driver.write(bytes)) path.pause();
      },
      ended: (ending) => {
        ended = true;
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
