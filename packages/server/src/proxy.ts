// The proxy: one provider-facing listener (port 14979 by default) serving both transports, one
// loopback listener for the program beside it, and the secrets gate they share.
import { bindPorts, PROXY_PORT, type BoundPorts } from "./bind.js";
import { Gate } from "./families/secrets/gate.js";
import { MultiplexerError } from "@diverge/multiplexer";
import { attachPaths, type PathsPart } from "./paths/index.js";
import type { PairStats } from "./multiplexed/pairs.js";
import { attachMultiplexed, type MultiplexedPart } from "./multiplexed/index.js";
import { SharedInwardMcp } from "./families/mcp-inward/shared.js";
import { realRoot, removeTemporaries, settleTemporaries } from "./families/filesystem/index.js";
import { resolveOptions, type ProxyContext, type ProxyOptions, type ResolvedProxyOptions } from "./context.js";

// The options and what every part is given live in context.ts (the transports import them from there).
export {
  resolveOptions,
  DEFAULT_MAX_OPEN_CHANNELS,
  DEFAULT_MAX_OPEN_SCOPES,
  DEFAULT_NOTIFICATION_BACKLOG_BYTES,
  DEFAULT_MAX_HELD_CONNECTIONS,
  DEFAULT_PROGRAM_SESSION_IDLE_MS,
  DEFAULT_MAX_PROGRAM_SESSIONS,
  type ProxyOptions,
  type ResolvedProxyOptions,
  type ProxyContext,
  type ProxyPart,
} from "./context.js";
export { PROXY_PORT };

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
    inward = new SharedInwardMcp(new URL(`http://127.0.0.1:${resolved.appPort}/mcp`), resolved.log, resolved.maxMessageBytes);
    const context: ProxyContext = { options: resolved, provider, program, gate, pgServer: ports.pg, inward };
    paths = attachPaths(context);
    multiplexed = await attachMultiplexed(context, paths);
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
      // The temporaries of writes still in flight go first (by their held directory and name).
      const root = await realRoot(resolved.root).catch(() => undefined);
      if (root !== undefined) removeTemporaries(root);
      await Promise.allSettled([paths.close(), multiplexed.close()]);
      await inward.close();
      await Promise.allSettled([provider.close(), program.close()]);
      if (root !== undefined) await settleTemporaries(root);
    },
  };
}
