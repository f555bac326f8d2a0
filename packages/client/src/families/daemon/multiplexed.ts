// The daemon pair on the multiplexed connection: the proxy announces a program's daemon connection
// (proxy-opened tag 1), the provider opens its half with the same id (provider-opened tag 2).
import type { AnnouncedConnection, PairFamily } from "../../multiplexed/pairs.js";

/** Who answers the program's daemon connections (part of `OpenContainerOptions`). */
export interface DaemonPairOptions {
  /** Called for every daemon connection the proxy announces; without it each is declined. As `onPostgres` for failures. */
  readonly onDaemon?: (connection: AnnouncedConnection) => unknown;
}

/** The daemon pair for the pair engine: announced by `Daemon`, answered by `onDaemon`. */
export const daemonPair: PairFamily<DaemonPairOptions> = {
  kind: "daemon",
  announcedBy: "Daemon",
  half: (id) => ({ variant: "Daemon", connection_id: id }),
  handler: (options) => options.onDaemon,
  noHandler: "no onDaemon handler",
};
