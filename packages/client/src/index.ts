// @diverge/client: the provider side. The engines of the many-paths transport live in paths/, the
// multiplexed connection in multiplexed/; every family (what is asked and answered) in families/.
export {
  connectProxy,
  ProviderError,
  type ProxyHandlers,
  type PathsConnection,
  type PathsConnectionEvent,
  type ConnectOptions,
  type RawPath,
  type ProviderErrorDetail,
  type SocketEnding,
  type WebSocketLike as PathsWebSocketLike,
  type WebSocketConstructor as PathsWebSocketConstructor,
} from "./paths/index.js";
export { relayToMcp, type McpAnswer, type AskInfo, type NotificationSink, type McpTarget, type RelayOptions, type McpRelay } from "./families/mcp-outward/index.js";
export * from "./multiplexed/index.js";
export { ContainerMcp, type NotificationStream, type NotificationsOptions } from "./families/mcp-inward/index.js";
export type { ContainerInfo, DivergeFrontMatter } from "./families/info/index.js";
export { pipePostgres, databaseAddress, DATABASE_BUDGET, type DatabaseAddress, type PipePostgresOptions } from "./families/postgres/index.js";
export * from "./families/filesystem/index.js";
export * from "./families/fuse/index.js";
export { perRequestSignalFetch, type FetchLike, type FetchWatch, type WatchedFetch } from "@diverge/multiplexer";
export { proxyBase, ProxyUrlError, type ProxyUrlErrorDetail } from "./url.js";
export { DEFAULT_TIMEOUT_MS, type RequestOptions } from "./waiting.js";
export { SPOKEN_REVISIONS, RevisionError, type SpokenRevision } from "@diverge/multiplexer";
export { dispatchRequestsAsk, dispatchToolsBeginChannelsProxyChannel, bindProviderAsks, type ProviderHandlers, type ProviderAsks, type DispatchedAsk } from "./gen/exchanges.js";
export { oneOf, streamOf, type AnswerContext, type ChannelAskEngine, type ChannelOutcome, type ChannelStream, type ChannelStreamEnding, type ChannelStreamListener } from "./exchanges/engine.js";
export { commandExec, STDERR_TAIL_BYTES } from "./families/command/index.js";
export { PostgresVault, type SqlClient, type VaultOptions } from "./families/vault/index.js";
export { serveToolsHttp, serveToolsStdio, parseHostPort, type RelayedMethod, type ToolsSource, type ServeToolsOptions, type ServeToolsHttpOptions, type ServingTools, type SourceCallOptions } from "./families/mcp-inward/index.js";
export { Exit, exitStatusOf, exitStatusHelp, BackendError, type ExitStatus } from "./commands/exit.js";
export { PathsTools, ToolPathError, type ToolPathErrorDetail } from "./families/mcp-inward/index.js";
export { pathAskEngine, type PathAskEngine, type PathAskEngineOptions, type PathAskOptions, type PathOutcome, type PathStream } from "./exchanges/paths.js";
export { bindProviderPathAsks, type ProviderPathAsks } from "./gen/exchanges.js";
export { postgresOverPaths, type PostgresPathsOptions, type PostgresPathsStats } from "./families/postgres/index.js";
export { mcpProviderHandlers } from "./families/mcp-outward/index.js";
export {
  beginPathsAgent,
  PathsAgent,
  ChunkFold,
  foldChunks,
  foldAll,
  blockOfUserPart,
  contentOf,
  serveAgentA2a,
  agentCardOf,
  blocksOfParts,
  ContainerAgentExecutor,
  AGENT_CARD_PATH,
  type Agent,
  type AgentBeginRequest,
  type AgentEvent,
  type ChunksOptions,
  type EnqueueFate,
  type EnqueueOptions,
  type SettledOptions,
  type FoldedMessage,
  type FoldStep,
  type UsageTotals,
  type ServeAgentOptions,
  type ServingAgent,
} from "./families/agents/index.js";
