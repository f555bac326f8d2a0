// The multiplexed transport of the proxy: the one connection on `/` (the provider is the Frames
// client, the proxy the server), the program's postgres listener and its `/daemon` endpoint.
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import type { WebSocket } from "ws";
import type { ProxyContext, ProxyPart } from "../context.js";
import type { ProxyConnection } from "./connection.js";
import { emptyPairStats, type PairStats } from "./pairs.js";
import type { PostgresOverRequests } from "../families/postgres/paths.js";

// The connection's code (with the MCP schema checks, the MCP SDK's client and YAML) is loaded when
// the provider first connects on `/`, not at start; ProxyConnection and the DIVERGE.md reader are
// exported from the package's index.
let connectionModule: typeof import("./connection.js") | undefined;
const loadConnection = async () => {
  connectionModule = await import("./connection.js");
};

export { DEFAULT_PAIR_BACKLOG_BYTES, DEFAULT_PAIR_BUDGET_BYTES, DEFAULT_PAIR_STALL_MS, HIGH_WATER, LOW_WATER, type PairStats } from "./pairs.js";

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

/** A program connection that came before the begin, held (unread) until the connection has begun. */
type Held = { readonly kind: "driver"; readonly socket: Socket } | { readonly kind: "daemon"; readonly socket: WebSocket };

export async function attachMultiplexed(context: ProxyContext, overRequests?: PostgresOverRequests): Promise<MultiplexedPart> {
  const { options, gate } = context;
  const log = options.log;
  let connection: ProxyConnection | undefined;
  let closed = false;
  // The socket of an upgrade of `/` being completed. Only a completed handshake takes the one
  // connection: one that fails (a bad key, a client gone before the 101) gives the claim back, which
  // here means its socket is destroyed (`ws` destroys it when it aborts the handshake).
  let handshaking: Duplex | undefined;
  const held = new Set<Held>();

  const closeHeld = (entry: Held) => (entry.kind === "driver" ? entry.socket.destroy() : entry.socket.terminate());
  const handOver = (current: ProxyConnection, entry: Held) => {
    if (entry.kind === "driver") void current.postgres.driverConnected(entry.socket);
    else void current.daemons.programConnected(entry.socket);
  };

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
              for (const entry of waiting) handOver(current, entry);
            },
            () => {
              // Ended before Begun. One that vanished before its first frame leaves them held for
              // the next; otherwise the container is over, and so are they.
              if (connection !== current) return;
              for (const entry of held) closeHeld(entry);
              held.clear();
            },
          );
        },
      };
    },
  });

  context.program.addUpgradeRoute({
    decide(pathname) {
      if (pathname !== "/daemon") return undefined;
      if (connection?.frames.closed || closed) return { refuse: 503 };
      if (!connection?.begin.begun && held.size >= options.maxHeldConnections) {
        log(`a daemon connection came before the begin; ${held.size} connections are held already: refused (503)`);
        return { refuse: 503 };
      }
      return {
        accept: (socket) => {
          if (connection?.frames.closed) return void socket.terminate();
          if (connection?.begin.begun) return void connection.daemons.programConnected(socket);
          // Held like a database driver: unread until the provider's connection has begun.
          socket.pause();
          const entry: Held = { kind: "daemon", socket };
          held.add(entry);
          socket.once("close", () => held.delete(entry));
        },
      };
    },
  });

  const drivers = new Set<Socket>();
  // The CLI binds the port before this part loads (context.pgServer) and hands its connections over.
  const pgServer: Server = context.pgServer ?? createServer();
  pgServer.on("connection", (socket: Socket) => {
    // A reset before anything else must not reach the process as an unhandled 'error'.
    socket.on("error", () => socket.destroy());
    drivers.add(socket);
    socket.once("close", () => drivers.delete(socket));
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
    const entry: Held = { kind: "driver", socket };
    held.add(entry);
    socket.once("close", () => held.delete(entry));
  });
  // A /requests connection opened while drivers are held and nobody has begun: it carries them.
  const stopCarrying = overRequests?.onAvailable(() => {
    if (connection?.begin.begun || closed) return;
    for (const entry of [...held]) {
      if (entry.kind !== "driver") continue;
      held.delete(entry);
      overRequests.carry(entry.socket);
    }
  });
  // Errors of the listener itself after it listens (EMFILE on accept, say) are reported, never thrown.
  const onServerError = (error: Error) => log(`postgres listener: ${(error as { code?: string }).code ?? error.name}`);
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
    get connection() {
      return connection;
    },
    get held() {
      return held.size;
    },
    postgresStats: () => (connection ? { ...connection.postgres.stats } : emptyPairStats()),
    daemonStats: () => (connection ? { ...connection.daemons.stats } : emptyPairStats()),
    async close() {
      closed = true;
      stopCarrying?.();
      await connection?.close();
      for (const entry of held) closeHeld(entry);
      held.clear();
      for (const socket of drivers) socket.destroy();
      await new Promise<void>((resolve) => pgServer.close(() => resolve()));
    },
  };
}
