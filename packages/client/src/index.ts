// @diverge/client: the provider side. The many-paths transport lives in paths/, the multiplexed
// connection in multiplexed/.
export {
  connectProxy,
  relayToMcp,
  ProviderError,
  type ProxyHandlers,
  type PathsConnection,
  type PathsConnectionEvent,
  type ConnectOptions,
  type McpAnswer,
  type AskInfo,
  type RawPath,
  type NotificationSink,
  type McpTarget,
  type RelayOptions,
  type McpRelay,
  type ProviderErrorDetail,
  type SocketEnding,
  type WebSocketLike as PathsWebSocketLike,
  type WebSocketConstructor as PathsWebSocketConstructor,
} from "./paths/index.js";
export * from "./multiplexed/index.js";
export * from "./filesystem/index.js";
export { perRequestSignalFetch, type FetchLike, type FetchWatch, type WatchedFetch } from "@diverge/multiplexer";
export { proxyBase, ProxyUrlError, type ProxyUrlErrorDetail } from "./url.js";
export { DEFAULT_TIMEOUT_MS, type RequestOptions } from "./waiting.js";
export { SPOKEN_REVISIONS, RevisionError, type SpokenRevision } from "@diverge/multiplexer";
export { dispatchRequestsAsk, dispatchToolsBeginChannelsProxyChannel, bindProviderAsks, type ProviderHandlers, type ProviderAsks, type DispatchedAsk } from "./gen/exchanges.js";
export { oneOf, streamOf, type AnswerContext, type ChannelAskEngine, type ChannelOutcome, type ChannelStream, type ChannelStreamEnding, type ChannelStreamListener } from "./exchanges/engine.js";
export { commandExec, STDERR_TAIL_BYTES } from "./families/command-exec.js";
export { PostgresVault, type SqlClient, type VaultOptions } from "./families/vault.js";
export { serveToolsHttp, serveToolsStdio, parseHostPort, type ToolsSource, type ServeToolsOptions, type ServeToolsHttpOptions, type ServingTools, type SourceCallOptions } from "./serve-tools.js";
export { Exit, exitStatusOf, exitStatusHelp, BackendError, type ExitStatus } from "./commands/exit.js";
export { PathsTools, ToolPathError, type ToolPathErrorDetail } from "./paths/tools.js";
export { pathAskEngine, type PathAskEngine, type PathAskEngineOptions, type PathAskOptions, type PathOutcome, type PathStream } from "./exchanges/paths.js";
export { bindProviderPathAsks, type ProviderPathAsks } from "./gen/exchanges.js";
export { postgresOverPaths, type PostgresPathsOptions, type PostgresPathsStats } from "./families/postgres-paths.js";
export { mcpProviderHandlers } from "./families/mcp-handlers.js";
