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
export { perRequestSignalFetch, type FetchLike, type FetchWatch, type WatchedFetch } from "@diverge/multiplexer";
export { proxyBase, ProxyUrlError, type ProxyUrlErrorDetail } from "./url.js";
export { DEFAULT_TIMEOUT_MS, type RequestOptions } from "./waiting.js";
export { SPOKEN_REVISIONS, RevisionError, type SpokenRevision } from "@diverge/multiplexer";
