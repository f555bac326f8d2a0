// The multiplexed connection to a container's proxy (path `/`), provider side. What each family asks
// or answers on it lives in families/.
export {
  openContainer,
  MultiplexedConnection,
  ContainerError,
  type AnnouncedConnection,
  type PairHalf,
  type BeginRequest,
  type ContainerErrorDetail,
  type DeclaredTool,
  type ErrorData as McpErrorData,
  type MultiplexedConnectionEvent,
  type OpenContainerOptions,
  type WebSocketConstructor as MultiplexedWebSocketConstructor,
} from "./container.js";
