// The postgres family's program side on the multiplexed transport: the loopback listener the
// program's database driver connects to. A driver is paired on the begin scope once the provider's
// connection has begun; before that a provider holding `/requests` carries it (kind 11), else it is
// held for whichever comes first, the begin or a `/requests` connection.
import { logEvent } from "@diverge/multiplexer/log";
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import type { ProxyConnection } from "../../multiplexed/connection.js";
import type { HeldConnection, ProgramSideServices } from "../../multiplexed/family.js";
import { emptyPairStats, type PairStats } from "../../multiplexed/pairs.js";
import type { PostgresOverRequests } from "./paths.js";

export async function attachPostgresListener({ context, connection: current, closed, held }: ProgramSideServices<ProxyConnection>, overRequests?: PostgresOverRequests) {
  const { options } = context;
  const log = options.log;
  /** Drivers held now, among every family's held connections: a /requests connection carries these. */
  const heldDrivers = new Map<HeldConnection<ProxyConnection>, Socket>();
  const drivers = new Set<Socket>();
  // The CLI binds the port before this part loads (context.pgServer) and hands its connections over.
  const pgServer: Server = context.pgServer ?? createServer();
  pgServer.on("connection", (socket: Socket) => {
    // A reset before anything else must not reach the process as an unhandled 'error'.
    socket.on("error", () => socket.destroy());
    // A database protocol of small request/answer messages: no Nagle delay on the driver's side either.
    socket.setNoDelay(true);
    drivers.add(socket);
    socket.once("close", () => drivers.delete(socket));
    const connection = current();
    if (connection && connection.frames.closed) {
      log("a database connection came after the provider connection ended: closed");
      return void socket.destroy();
    }
    if (connection?.begin.begun) return void connection.postgres.driverConnected(socket);
    // No provider has begun on /: a provider holding /requests carries it (kind 11), else it is held
    // for whichever comes first, the begin or a /requests connection.
    if (overRequests?.available) return void overRequests.carry(socket);
    if (held.size >= options.maxHeldConnections) {
      log(`a database connection came before the begin; ${held.size} connections are held already: closed`);
      return void socket.destroy();
    }
    socket.pause();
    const entry: HeldConnection<ProxyConnection> = {
      handOver: (begun) => {
        heldDrivers.delete(entry);
        void begun.postgres.driverConnected(socket);
      },
      close: () => {
        heldDrivers.delete(entry);
        socket.destroy();
      },
    };
    held.add(entry);
    heldDrivers.set(entry, socket);
    socket.once("close", () => {
      held.delete(entry);
      heldDrivers.delete(entry);
    });
  });
  // A /requests connection opened while drivers are held and nobody has begun: it carries them.
  const stopCarrying = overRequests?.onAvailable(() => {
    if (current()?.begin.begun || closed()) return;
    for (const [entry, socket] of [...heldDrivers]) {
      held.delete(entry);
      heldDrivers.delete(entry);
      overRequests.carry(socket);
    }
  });
  // Errors of the listener itself after it listens (EMFILE on accept, say) are reported, never thrown.
  const onServerError = (error: Error) => log(...logEvent("postgres listener: {error}", { error: (error as { code?: string }).code ?? error.name }));
  if (pgServer.listening) pgServer.on("error", onServerError);
  else
    await new Promise<void>((resolve, reject) => {
      pgServer.once("error", reject);
      pgServer.listen(options.pgPort, "127.0.0.1", () => {
        pgServer.off("error", reject);
        pgServer.on("error", onServerError);
        resolve();
      });
    });
  const pgPort = (pgServer.address() as AddressInfo).port;
  log(`postgres listener on 127.0.0.1:${pgPort}`);
  return {
    pgPort,
    /** Traffic of the postgres pairs so far. */
    stats: (): PairStats => {
      const connection = current();
      return connection ? { ...connection.postgres.stats } : emptyPairStats();
    },
    /** No more is carried on /requests. */
    stopCarrying: () => stopCarrying?.(),
    /** Every driver goes, and the listener with them. */
    async close() {
      for (const socket of drivers) socket.destroy();
      await new Promise<void>((resolve) => pgServer.close(() => resolve()));
    },
  };
}
