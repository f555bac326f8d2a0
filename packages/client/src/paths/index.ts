// The provider side of the many-paths transport: `connectProxy` holds `/requests` and answers on the
// answer paths; `relayToMcp` supplies handlers that forward to a real MCP server.
export { connectProxy, type ProxyHandlers, type PathsConnection, type PathsConnectionEvent, type ConnectOptions, type McpAnswer, type AskInfo, type NotificationSink, type RawPath } from "./connect.js";
export { relayToMcp, type McpTarget, type RelayOptions, type McpRelay } from "./relay.js";
export { ProviderError, type ProviderErrorDetail } from "./errors.js";
export { openSocket, defaultWebSocket, type WebSocketLike, type WebSocketConstructor, type OpenSocket, type SocketEnding, type OpenFailure } from "./socket.js";
