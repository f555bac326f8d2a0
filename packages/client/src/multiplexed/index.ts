// The multiplexed connection to a container's proxy (path `/`), provider side.
export {
  openContainer,
  ContainerConnection,
  ContainerError,
  McpAsks,
  type AnnouncedConnection,
  type PairHalf,
  type BeginRequest,
  type ContainerErrorDetail,
  type DivergeInfo,
  type ErrorData as McpErrorData,
  type NotificationStream,
  type OpenContainerOptions,
  type WebSocketConstructor as MultiplexedWebSocketConstructor,
} from "./container.js";
export { pipePostgres, databaseAddress, type DatabaseAddress } from "./postgres.js";
