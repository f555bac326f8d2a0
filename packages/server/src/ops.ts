// `diverge-proxy --health <host:port>`: what /healthz says of a running proxy, and the counters of
// its stats() as /metrics (served by @diverge/multiplexer/ops with prom-client).
import type { Health, OpsMetric } from "@diverge/multiplexer/ops";
import type { RunningProxy } from "./proxy.js";

/**
 * Ready (200) once the proxy has attached its parts and serves both transports; before that (the
 * ports bound, the proxy loading) 503. Says what the provider holds: the multiplexed connection on /
 * (none, open, ended; begun or not), whether a /requests connection is open, and whether the program
 * has taken its secrets.
 */
export function proxyHealth(proxy: RunningProxy | undefined, startedAt: number): Health {
  const uptimeSeconds = Math.round((Date.now() - startedAt) / 1000);
  if (!proxy) return { ready: false, status: "starting", uptimeSeconds };
  const connection = proxy.multiplexed.connection;
  return {
    ready: true,
    status: "serving",
    uptimeSeconds,
    provider: {
      multiplexed: connection === undefined ? "none" : connection.frames.mux.ended ? "ended" : "open",
      begun: connection?.begin.begun ?? false,
      requests: proxy.paths.board.requestsOpen ? "open" : "none",
    },
    program: { secretsTaken: proxy.gate.isOpen, heldConnections: proxy.multiplexed.held, heldBySecretsGate: proxy.gate.held },
    pendingAsks: proxy.stats().pendingAsks,
  };
}

/** The proxy's counters (RunningProxy.stats()) as Prometheus metrics, read at every scrape. */
export function proxyMetrics(proxy: () => RunningProxy | undefined): OpsMetric[] {
  const stats = () => proxy()?.stats();
  const pairs = (read: (s: NonNullable<ReturnType<typeof stats>>["postgres"]) => number) => () => {
    const s = stats();
    return s ? [[{ family: "postgres" }, read(s.postgres)] as const, [{ family: "daemon" }, read(s.daemon)] as const] : [];
  };
  return [
    { name: "diverge_proxy_ready", help: "1 once the proxy serves both transports", type: "gauge", read: () => (proxy() ? 1 : 0) },
    { name: "diverge_proxy_begun", help: "1 while the provider's multiplexed connection has begun", type: "gauge", read: () => (proxy()?.multiplexed.connection?.begin.begun ? 1 : 0) },
    // served
    { name: "diverge_proxy_pair_connections_total", help: "program connections (database, daemon) announced to the provider", type: "counter", labelNames: ["family"], read: pairs((p) => p.announced) },
    { name: "diverge_proxy_pair_frames_total", help: "frames relayed on the database and daemon pairs", type: "counter", labelNames: ["family", "direction"], read: () => {
      const s = stats();
      if (!s) return [];
      return (["postgres", "daemon"] as const).flatMap((family) => [[{ family, direction: "to_program" }, s[family].toProgramFrames] as const, [{ family, direction: "to_provider" }, s[family].toProviderFrames] as const]);
    } },
    { name: "diverge_proxy_pair_bytes_total", help: "bytes relayed on the database and daemon pairs", type: "counter", labelNames: ["family", "direction"], read: () => {
      const s = stats();
      if (!s) return [];
      return (["postgres", "daemon"] as const).flatMap((family) => [[{ family, direction: "to_program" }, s[family].toProgramBytes] as const, [{ family, direction: "to_provider" }, s[family].toProviderBytes] as const]);
    } },
    // refused
    { name: "diverge_proxy_refused_asks_total", help: "outward MCP exchanges refused over --max-pending-asks", type: "counter", read: () => stats()?.refusedAsks ?? 0 },
    { name: "diverge_proxy_refused_channels_total", help: "channels refused over --max-open-channels", type: "counter", read: () => stats()?.refusedChannels ?? 0 },
    { name: "diverge_proxy_refused_scopes_total", help: "scopes refused over --max-open-scopes", type: "counter", read: () => stats()?.refusedScopes ?? 0 },
    { name: "diverge_proxy_oversized_answers_total", help: "answers on / larger than the message limit (replaced by an error or not served)", type: "counter", read: () => stats()?.oversizedAnswers ?? 0 },
    { name: "diverge_proxy_pairs_ended_total", help: "database and daemon pairs ended by the proxy", type: "counter", labelNames: ["family", "reason"], read: () => {
      const s = stats();
      if (!s) return [];
      return (["postgres", "daemon"] as const).flatMap((family) => [[{ family, reason: "backlog" }, s[family].endedOverBacklog] as const, [{ family, reason: "stalled" }, s[family].endedStalled] as const]);
    } },
    // dropped
    { name: "diverge_proxy_dropped_notifications_total", help: "notifications dropped because whoever they were for could not keep pace, per stream", type: "counter", labelNames: ["stream"], read: () => Object.entries(stats()?.droppedNotifications.byStream ?? {}).map(([stream, n]) => [{ stream }, n] as const) },
    { name: "diverge_proxy_discarded_bytes_total", help: "bytes the provider sent on pairs already ended", type: "counter", labelNames: ["family"], read: pairs((p) => p.discardedBytes) },
    // held
    { name: "diverge_proxy_pending_asks", help: "outward MCP exchanges waiting for the provider's answers now", type: "gauge", read: () => stats()?.pendingAsks ?? 0 },
    { name: "diverge_proxy_open_channels", help: "channels the provider holds open on / now", type: "gauge", read: () => stats()?.openChannels ?? 0 },
    { name: "diverge_proxy_held_connections", help: "program connections held until the provider's connection has begun", type: "gauge", read: () => proxy()?.multiplexed.held ?? 0 },
    { name: "diverge_proxy_pairs_holding_connection", help: "pairs holding the provider connection paused now", type: "gauge", labelNames: ["family"], read: pairs((p) => p.holdingNow) },
  ];
}
