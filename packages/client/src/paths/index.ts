// The provider side of the many-paths transport: `connectProxy` holds `/requests` and answers on the
// answer paths. What each family answers there lives in families/.
export { connectProxy, type ProxyHandlers, type PathsConnection, type PathsConnectionEvent, type ConnectOptions, type RawPath } from "./connect.js";
export { ProviderError, type ProviderErrorDetail } from "./errors.js";
export { openSocket, defaultWebSocket, type WebSocketLike, type WebSocketConstructor, type OpenSocket, type SocketEnding, type OpenFailure } from "./socket.js";
