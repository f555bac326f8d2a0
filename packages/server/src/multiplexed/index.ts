// The multiplexed transport of the proxy: the one connection on `/` (the provider is the Frames
// client, the proxy the server), the program's postgres listener and its `/daemon` endpoint.
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import type { ProxyContext, ProxyPart } from "../proxy.js";
import { ProxyConnection } from "./connection.js";
import { emptyPairStats, type PairStats } from "./pairs.js";

export { ProxyConnection } from "./connection.js";
export { parseDivergeMarkdown, readDivergeInfo, type DivergeInfo } from "./info.js";
export { HIGH_WATER, LOW_WATER, type PairStats } from "./pairs.js";

export interface MultiplexedPart extends ProxyPart {
  /** The loopback port the program's database driver connects to. */
  readonly pgPort: number;
  /** The connection, once the provider has made it (there is only ever one). */
  readonly connection: ProxyConnection | undefined;
  /** Traffic of the postgres pairs so far. */
  postgresStats(): PairStats;
}

export async function attachMultiplexed(context: ProxyContext): Promise<MultiplexedPart> {
  const { options, gate } = context;
  let connection: ProxyConnection | undefined;
  // Set when the first upgrade is decided, so even a concurrent second one is refused.
  let taken = false;

  context.provider.addUpgradeRoute({
    decide(pathname) {
      if (pathname !== "/") return undefined;
      // Exactly one connection in the proxy's life, whether or not the first is still open.
      if (taken) {
        options.log("refused a second provider connection on / (HTTP 409): a proxy takes one provider connection on / in its life, even after it ended");
        return { refuse: 409 };
      }
      taken = true;
      return {
        accept(socket) {
          options.log("the provider connected on /");
          connection = new ProxyConnection(socket as never, options, gate, () => options.log("the provider connection ended"));
          for (const driver of waitingDrivers.splice(0)) void connection.postgres.driverConnected(driver);
        },
      };
    },
  });

  context.program.addUpgradeRoute({
    decide(pathname) {
      if (pathname !== "/daemon") return undefined;
      if (!connection || connection.frames.closed) return { refuse: 503 };
      const current = connection;
      return { accept: (socket) => void current.daemons.programConnected(socket) };
    },
  });

  // Drivers that connect before the provider has are held (unread) until its connection exists.
  const waitingDrivers: Socket[] = [];
  const drivers = new Set<Socket>();
  const pgServer: Server = createServer((socket) => {
    drivers.add(socket);
    socket.once("close", () => drivers.delete(socket));
    if (connection) void connection.postgres.driverConnected(socket);
    else {
      socket.pause();
      waitingDrivers.push(socket);
    }
  });
  await new Promise<void>((resolve, reject) => {
    pgServer.once("error", reject);
    pgServer.listen(options.pgPort, "127.0.0.1", () => {
      pgServer.off("error", reject);
      resolve();
    });
  });
  const pgPort = (pgServer.address() as AddressInfo).port;
  options.log(`postgres listener on 127.0.0.1:${pgPort}`);

  return {
    pgPort,
    get connection() {
      return connection;
    },
    postgresStats: () => (connection ? { ...connection.postgres.stats } : emptyPairStats()),
    async close() {
      await connection?.close();
      for (const socket of drivers) socket.destroy();
      await new Promise<void>((resolve) => pgServer.close(() => resolve()));
    },
  };
}
