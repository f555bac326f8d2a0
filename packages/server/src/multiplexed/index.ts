// The multiplexed transport of the proxy: the one connection on `/` (the provider is the Frames
// client, the proxy the server), and the program connections held until it has begun. The program's
// side of it (the postgres listener, `/daemon`) is the families', attached from the registry.
import type { Duplex } from "node:stream";
import type { ProxyContext, ProxyPart } from "../context.js";
import type { ProxyConnection } from "./connection.js";
import type { PairStats } from "./pairs.js";
import type { HeldConnection } from "./family.js";
import { attachProgramSides, type PathsFamilies } from "../families/index.js";

// The connection's code (with the MCP schema checks, the MCP SDK's client and YAML) is loaded when
// the provider first connects on `/`, not at start; ProxyConnection and the DIVERGE.md reader are
// exported from the package's index.
let connectionModule: typeof import("./connection.js") | undefined;
const loadConnection = async () => {
  connectionModule = await import("./connection.js");
};

export { DEFAULT_PAIR_BACKLOG_BYTES, DEFAULT_PAIR_BUDGET_BYTES, DEFAULT_PAIR_STALL_MS, DEFAULT_PAIR_SPILL_BYTES, DEFAULT_SPILL_BYTES, HIGH_WATER, LOW_WATER, type PairStats } from "./pairs.js";

export interface MultiplexedPart extends ProxyPart {
  /** The loopback port the program's database driver connects to. */
  readonly pgPort: number;
  /** The connection, once the provider has made it (there is only ever one). */
  readonly connection: ProxyConnection | undefined;
  /** Program connections held now until the provider's connection has begun. */
  readonly held: number;
  /** Traffic of the postgres pairs so far. */
  postgresStats(): PairStats;
  /** Traffic of the daemon pairs so far. */
  daemonStats(): PairStats;
}

export async function attachMultiplexed(context: ProxyContext, paths?: Pick<PathsFamilies, "postgres">): Promise<MultiplexedPart> {
  const { options, gate } = context;
  const log = options.log;
  let connection: ProxyConnection | undefined;
  let closed = false;
  // The socket of an upgrade of `/` being completed. Only a completed handshake takes the one
  // connection: one that fails (a bad key, a client gone before the 101) gives the claim back, which
  // here means its socket is destroyed (`ws` destroys it when it aborts the handshake).
  let handshaking: Duplex | undefined;
  const held = new Set<HeldConnection<ProxyConnection>>();

  context.provider.addUpgradeRoute({
    decide(pathname, request) {
      if (pathname !== "/") return undefined;
      // Exactly one connection in the proxy's life, whether or not the first is still open.
      if (connection || closed || (handshaking && !handshaking.destroyed)) {
        log("refused a second provider connection on / (HTTP 409): a proxy takes one provider connection on / in its life, even after it ended");
        return { refuse: 409 };
      }
      handshaking = request.socket;
      const stream = request.socket;
      return {
        prepare: () => (connectionModule ? undefined : loadConnection()),
        accept(socket) {
          handshaking = undefined;
          log("the provider connected on /");
          const current: ProxyConnection = new connectionModule!.ProxyConnection(socket as never, options, gate, ({ code, spoken }) => {
            if (!spoken && code === 1006 && !closed && connection === current) {
              // Gone before its first frame and without a closing handshake (a client that vanished
              // right after the 101): nothing happened on it, so it did not take the one connection.
              connection = undefined;
              log("the provider connection on / was cut before its first frame; the next one is accepted");
              return;
            }
            log("the provider connection ended");
          }, context.inward, stream);
          connection = current;
          // Program connections are held until the begin is answered Begun, then handed over.
          current.whenBegun.then(
            () => {
              const waiting = [...held];
              held.clear();
              for (const entry of waiting) entry.handOver(current);
            },
            () => {
              // Ended before Begun. One that vanished before its first frame leaves them held for
              // the next; otherwise the container is over, and so are they.
              if (connection !== current) return;
              for (const entry of held) entry.close();
              held.clear();
            },
          );
        },
      };
    },
  });

  const programSides = await attachProgramSides({ context, connection: () => connection, closed: () => closed, held }, paths);

  return {
    pgPort: programSides.pgPort,
    get connection() {
      return connection;
    },
    get held() {
      return held.size;
    },
    postgresStats: programSides.postgresStats,
    daemonStats: programSides.daemonStats,
    async close() {
      closed = true;
      programSides.stopCarrying();
      await connection?.close();
      for (const entry of held) entry.close();
      held.clear();
      await programSides.close();
    },
  };
}
