// The daemon family's program side on the multiplexed transport: the loopback `/daemon` endpoint the
// program dials. A daemon connection is paired on the begin scope once the provider's connection has
// begun; before that it is held like a database driver (unread), and refused with 503 past the bound.
import type { ProxyConnection } from "../../multiplexed/connection.js";
import type { HeldConnection, ProgramSideServices } from "../../multiplexed/family.js";
import { emptyPairStats, type PairStats } from "../../multiplexed/pairs.js";

export function attachDaemonEndpoint({ context, connection: current, closed, held }: ProgramSideServices<ProxyConnection>) {
  const { options } = context;
  const log = options.log;
  context.program.addUpgradeRoute({
    decide(pathname) {
      if (pathname !== "/daemon") return undefined;
      const connection = current();
      if (connection?.frames.closed || closed()) return { refuse: 503 };
      if (!connection?.begin.begun && held.size >= options.maxHeldConnections) {
        log(`a daemon connection came before the begin; ${held.size} connections are held already: refused (503)`);
        return { refuse: 503 };
      }
      return {
        accept: (socket) => {
          const connection = current();
          if (connection?.frames.closed) return void socket.terminate();
          if (connection?.begin.begun) return void connection.daemons.programConnected(socket);
          // Held like a database driver: unread until the provider's connection has begun.
          socket.pause();
          const entry: HeldConnection<ProxyConnection> = {
            handOver: (begun) => void begun.daemons.programConnected(socket),
            close: () => socket.terminate(),
          };
          held.add(entry);
          socket.once("close", () => held.delete(entry));
        },
      };
    },
  });
  return {
    /** Traffic of the daemon pairs so far. */
    stats: (): PairStats => {
      const connection = current();
      return connection ? { ...connection.daemons.stats } : emptyPairStats();
    },
  };
}
