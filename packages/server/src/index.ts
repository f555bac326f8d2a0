export { startProxy, resolveOptions, PROXY_PORT, DEFAULT_PROGRAM_SESSION_IDLE_MS, DEFAULT_MAX_OPEN_CHANNELS, DEFAULT_MAX_OPEN_SCOPES, type ProxyStats, type ProxyOptions, type RunningProxy, type ProxyContext, type ProxyPart, type ResolvedProxyOptions } from "./proxy.js";
export { Gate } from "./gate.js";
export { RouteListener, DEFAULT_MAX_MESSAGE_BYTES, LOOPBACK_HOSTS, guardRefusal, type HostGuard, type UpgradeRoute, type RequestRoute, type UpgradeDecision } from "./listener.js";
export { McpAsks, McpExchangeError, DEFAULT_MAX_PENDING_ASKS, type McpAskStats, AskBoard, ProgramMcpServer, ANSWER_PATH_PREFIX, type RequestsKind, type PathsPart, type McpExchangeErrorDetail, type NotificationStreamEvent, type McpKind, type PathEnding, type BoardEvent } from "./paths/index.js";
export { ProxyConnection, parseDivergeMarkdown, readDivergeInfo, type MultiplexedPart, type PairStats, type DivergeInfo } from "./multiplexed/index.js";
export { SPOKEN_REVISIONS, RevisionError, speakRevision, type SpokenRevision } from "@diverge/multiplexer";
export { RequestsEngine, encodeAskOnRequests, TooDeep, type AskEngine, type AskOptions, type AskOutcome, type AskStream, type StreamEnding, type RequestsEngineOptions } from "./exchanges/engine.js";
export { bindProxyAsks, type ProxyAsks } from "./gen/exchanges.js";
