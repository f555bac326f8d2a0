// The proxy: one provider-facing listener (port 14979 by default) serving both transports, one
// loopback listener for the program beside it, and the secrets gate they share.
import type { Server as NetServer } from "node:net";
import { speakRevision, type SpokenRevision } from "@diverge/multiplexer";
import { bindPorts, PROXY_PORT, resolveBindOptions, type BoundPorts } from "./bind.js";
import { Gate } from "./gate.js";
import type { RouteListener } from "./listener.js";
import { MultiplexerError } from "@diverge/multiplexer";
import { attachPaths, DEFAULT_MAX_PENDING_ASKS, type PathsPart } from "./paths/index.js";
import { DEFAULT_PAIR_BACKLOG_BYTES, DEFAULT_PAIR_BUDGET_BYTES, DEFAULT_PAIR_STALL_MS, type PairStats } from "./multiplexed/pairs.js";
import { attachMultiplexed, type MultiplexedPart } from "./multiplexed/index.js";
import { SharedInwardMcp } from "./inward-shared.js";

export { PROXY_PORT };

export interface ProxyOptions {
  /** The spec revision to speak (see `SPOKEN_REVISIONS`). Default the newest; another is a RevisionError. */
  readonly revision?: string;
  /** Provider-facing interface; the spec says every interface ("0.0.0.0"). Default "127.0.0.1" for library use. */
  readonly host?: string;
  /** Provider-facing port (`/`, `/requests`, answer paths). Default 14979; 0 picks a free one. */
  readonly port?: number;
  /** Loopback port for the program: its MCP endpoint at `/mcp`, the daemon endpoint at `/daemon`. Default 14980; 0 picks one. */
  readonly programPort?: number;
  /** The program's own HTTP server (`/register`, `/secrets`, `/mcp`). Default `$PORT`, else 8080. */
  readonly appPort?: number;
  /**
   * The container root: `DIVERGE.md` is read there, and the filesystem endpoints (tree, read,
   * write) see and touch nothing outside it, whatever links inside it point to. Default "/".
   */
  readonly root?: string;
  /** Loopback port where the program's database driver connects. Default 14981; 0 picks one. */
  readonly pgPort?: number;
  /** Hold every MCP exchange until the first `Fed` of a secrets feed. Default true. */
  readonly secretsGate?: boolean;
  /** Largest message accepted on any path, in bytes. Default 16 MiB. */
  readonly maxMessageBytes?: number;
  /** MCP exchanges the proxy may have waiting for the provider's answers at once; more fail with `TooManyPending`. Default 10 000. */
  readonly maxPendingAsks?: number;
  /** Channels the provider may hold open at once on the multiplexed connection; a channel request beyond it gets a bare finish. Default 4096. */
  readonly maxOpenChannels?: number;
  /** Scopes the provider may hold open at once on the multiplexed connection; a request beyond it gets a bare finish. Default 64. */
  readonly maxOpenScopes?: number;
  /** Bytes that may wait in the multiplexed connection's send buffer before a tag-7 channel drops notifications (counted in `stats()`). Default 8 MiB. */
  readonly maxNotificationBacklogBytes?: number;
  /**
   * The hard cap: bytes from the provider one program socket (a database driver's, a daemon
   * connection's) may hold unread; beyond it that pair ends, and only it. The budget pauses the
   * connection long before, so only a connection that cannot pause reaches it. Also the content bytes
   * a filesystem write may hold before they reach the disk. Default 64 MiB.
   */
  readonly maxPairBacklogBytes?: number;
  /**
   * Bytes from the provider one program socket may hold unread before its pair pauses reading the
   * multiplexed connection (every channel waits) until the socket drains to a quarter of it; at most
   * half of `maxPairBacklogBytes`. Default 2 MiB (the proxy's memory per slow pair: see the README).
   */
  readonly pairBudgetBytes?: number;
  /** How long a pair may keep the connection paused while its program reads nothing before that pair ends, in ms. Default 10 000. */
  readonly pairStallMs?: number;
  /** Program connections (database drivers, `/daemon` dials) held before the provider has begun; more are closed (drivers) or refused with 503 (`/daemon`). Default 256. */
  readonly maxHeldConnections?: number;
  /**
   * `Host` names the program-facing listener accepts besides `localhost`, `127.0.0.1` and `[::1]`
   * (any port); `"*"` accepts any. Every other `Host` is refused with 403 (DNS-rebinding protection).
   */
  readonly allowedHosts?: readonly string[];
  /**
   * `Origin`s (`scheme://host[:port]`) the program-facing listener accepts besides loopback ones;
   * `"*"` accepts any. A request with any other `Origin` is refused with 403; one without is not checked.
   */
  readonly allowedOrigins?: readonly string[];
  /** A program MCP session with no request in flight and no notification stream open is released after this long, in ms. Default 300 000 (5 minutes). */
  readonly programSessionIdleMs?: number;
  /** Program MCP sessions held at once; an `initialize` beyond it releases the oldest quiet session, or gets 503 when none is quiet. Default 1000. */
  readonly maxProgramSessions?: number;
  /** Where the proxy reports what happens; never given a secret value. Default: silent. */
  readonly log?: (line: string) => void;
}

export interface ResolvedProxyOptions extends Required<Omit<ProxyOptions, "log" | "revision" | "allowedHosts" | "allowedOrigins">> {
  readonly allowedHosts: readonly string[];
  readonly allowedOrigins: readonly string[];
  readonly revision: SpokenRevision;
  readonly log: (line: string) => void;
}

/** What every part of the proxy is given. */
export interface ProxyContext {
  readonly options: ResolvedProxyOptions;
  /** Provider-facing: `/`, `/requests`, `/mcp/<kind>/{channel}`, … */
  readonly provider: RouteListener;
  /** Program-facing, loopback only: `/mcp`, `/daemon`. */
  readonly program: RouteListener;
  readonly gate: Gate;
  /**
   * The proxy's one MCP client to the container's own MCP server (`http://127.0.0.1:<app port>/mcp`),
   * dialled on first use and again when its transport died; the begin scope's MCP channels and the
   * paths transport's `/tool/*` share it.
   */
  readonly inward: SharedInwardMcp;
  /** The postgres listener, when it was bound before the parts were attached. */
  readonly pgServer?: NetServer;
}

export interface ProxyPart {
  close(): Promise<void>;
}

export const DEFAULT_MAX_OPEN_CHANNELS = 4096;
export const DEFAULT_MAX_OPEN_SCOPES = 64;
export const DEFAULT_NOTIFICATION_BACKLOG_BYTES = 8 * 1024 * 1024;
export const DEFAULT_MAX_HELD_CONNECTIONS = 256;
export const DEFAULT_PROGRAM_SESSION_IDLE_MS = 300_000;
export const DEFAULT_MAX_PROGRAM_SESSIONS = 1000;

/** Counters of a running proxy: what its bounded queues dropped or refused, and what is open now. */
export interface ProxyStats {
  /** Notifications dropped because whoever they were for could not keep pace. */
  readonly droppedNotifications: {
    readonly total: number;
    /** Per stream: `"/ channel <n>"` for a tag-7 channel of the multiplexed connection (dropped while the connection's send buffer was full, or larger than the message limit); `"/mcp/notifications"` for the provider's messages larger than the limit on the paths transport; `"iterators"` for `proxy.mcp.notifications()` loops that did not pull. */
    readonly byStream: Readonly<Record<string, number>>;
  };
  /** Outward MCP exchanges waiting for the provider's answers now, and how many were refused over `maxPendingAsks`. */
  readonly pendingAsks: number;
  readonly refusedAsks: number;
  /** Channels the provider holds open on `/` now, and requests refused over `maxOpenChannels` / `maxOpenScopes`. */
  readonly openChannels: number;
  readonly refusedChannels: number;
  readonly refusedScopes: number;
  /** Answers on `/` that were larger than the message limit: an MCP answer replaced by an MCP error, or an Info not served. */
  readonly oversizedAnswers: number;
  /** Traffic of the postgres pairs, with the peaks of their buffers. */
  readonly postgres: PairStats;
  /** Traffic of the daemon pairs, with the peaks of their buffers. */
  readonly daemon: PairStats;
}

export interface RunningProxy {
  readonly options: ResolvedProxyOptions;
  /** The port the provider-facing listener is bound to. */
  readonly port: number;
  /** The port the program-facing listener is bound to. */
  readonly programPort: number;
  readonly gate: Gate;
  /** The many-paths transport: `/requests` asks and their answer paths. */
  readonly paths: PathsPart;
  /** The MCP exchanges the proxy asks its provider (the same object as `paths.mcp`). */
  readonly mcp: PathsPart["mcp"];
  /** The multiplexed connection on `/` and its tools::begin scope. */
  readonly multiplexed: MultiplexedPart;
  /** The proxy's one MCP client to the container's MCP server, shared by the begin scope and `/tool/*`. */
  readonly inward: SharedInwardMcp;
  /** The counters of the proxy's bounded queues, now. */
  stats(): ProxyStats;
  close(): Promise<void>;
}

export function resolveOptions(options: ProxyOptions = {}): ResolvedProxyOptions {
  const envPort = Number(process.env.PORT);
  const bind = resolveBindOptions(options);
  return {
    revision: speakRevision(options.revision),
    host: bind.host,
    port: bind.port,
    programPort: bind.programPort,
    appPort: options.appPort ?? (Number.isInteger(envPort) && envPort > 0 ? envPort : 8080),
    root: options.root ?? "/",
    pgPort: bind.pgPort,
    secretsGate: options.secretsGate ?? true,
    maxMessageBytes: bind.maxMessageBytes,
    maxPendingAsks: options.maxPendingAsks ?? DEFAULT_MAX_PENDING_ASKS,
    maxOpenChannels: options.maxOpenChannels ?? DEFAULT_MAX_OPEN_CHANNELS,
    maxOpenScopes: options.maxOpenScopes ?? DEFAULT_MAX_OPEN_SCOPES,
    maxNotificationBacklogBytes: options.maxNotificationBacklogBytes ?? DEFAULT_NOTIFICATION_BACKLOG_BYTES,
    maxPairBacklogBytes: options.maxPairBacklogBytes ?? DEFAULT_PAIR_BACKLOG_BYTES,
    pairBudgetBytes: options.pairBudgetBytes ?? DEFAULT_PAIR_BUDGET_BYTES,
    pairStallMs: options.pairStallMs ?? DEFAULT_PAIR_STALL_MS,
    maxHeldConnections: options.maxHeldConnections ?? DEFAULT_MAX_HELD_CONNECTIONS,
    allowedHosts: bind.allowedHosts,
    allowedOrigins: bind.allowedOrigins,
    programSessionIdleMs: options.programSessionIdleMs ?? DEFAULT_PROGRAM_SESSION_IDLE_MS,
    maxProgramSessions: options.maxProgramSessions ?? DEFAULT_MAX_PROGRAM_SESSIONS,
    log: options.log ?? (() => {}),
  };
}

/**
 * Starts a proxy: its ports bound, both transports served. `bound` (for `diverge-proxy`, which binds
 * the ports before loading this module) are ports bound with the same options by `bindPorts`; what
 * waited on them is served once the parts are attached.
 */
export async function startProxy(options: ProxyOptions = {}, bound?: BoundPorts): Promise<RunningProxy> {
  const resolved = resolveOptions(options);
  const ports = bound ?? (await bindPorts(resolved));
  const { provider, program } = ports;
  let paths: PathsPart;
  let multiplexed: MultiplexedPart;
  let gate: Gate;
  let inward: SharedInwardMcp;
  try {
    gate = new Gate(!resolved.secretsGate, () =>
      resolved.log("the secrets gate holds MCP exchanges until the program takes its secrets: the provider feeds them on / (tools::begin Secrets); start with --no-secrets-gate if the program declares none"),
    );
    inward = new SharedInwardMcp(new URL(`http://127.0.0.1:${resolved.appPort}/mcp`), resolved.log);
    const context: ProxyContext = { options: resolved, provider, program, gate, pgServer: ports.pg, inward };
    paths = attachPaths(context);
    multiplexed = await attachMultiplexed(context, paths.postgres);
    const beginScopeOf = multiplexed;
    // Exchanges with a begin-scope channel go on it once the provider's connection has begun.
    paths.useBeginScope(() => {
      const connection = beginScopeOf.connection;
      const scope = connection?.begin.begun ? connection.begin.scope : undefined;
      if (!connection || scope === undefined || connection.frames.mux.ended) return undefined;
      return {
        key: connection,
        openChannel: (payload, handlers) => {
          try {
            return connection.frames.mux.openChannel(scope, payload, handlers);
          } catch (error) {
            // The begin scope is gone (the connection is ending): `/requests` carries the ask instead.
            if (error instanceof MultiplexerError) return undefined;
            throw error;
          }
        },
      };
    });
  } catch (problem) {
    await ports.close();
    throw problem;
  }
  ports.release();
  return {
    options: resolved,
    port: provider.port,
    programPort: program.port,
    gate,
    paths,
    mcp: paths.mcp,
    multiplexed,
    inward,
    stats() {
      const asks = paths.mcp.stats();
      const connection = multiplexed.connection?.stats();
      const byStream: Record<string, number> = { ...(connection?.droppedNotifications ?? {}) };
      if (asks.droppedByIterators > 0) byStream.iterators = asks.droppedByIterators;
      if (asks.droppedOversized > 0) byStream["/mcp/notifications"] = asks.droppedOversized;
      return {
        droppedNotifications: { total: Object.values(byStream).reduce((sum, n) => sum + n, 0), byStream },
        pendingAsks: asks.pending,
        refusedAsks: asks.refusedPending,
        openChannels: connection?.openChannels ?? 0,
        refusedChannels: connection?.refusedChannels ?? 0,
        refusedScopes: connection?.refusedScopes ?? 0,
        oversizedAnswers: connection?.oversizedAnswers ?? 0,
        postgres: multiplexed.postgresStats(),
        daemon: multiplexed.daemonStats(),
      };
    },
    async close() {
      await Promise.allSettled([paths.close(), multiplexed.close()]);
      await inward.close();
      await Promise.allSettled([provider.close(), program.close()]);
    },
  };
}
