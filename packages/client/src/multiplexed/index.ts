// The multiplexed connection to a container's proxy (path `/`), provider side.
export {
  openContainer,
  MultiplexedConnection,
  ContainerError,
  ContainerMcp,
  type AnnouncedConnection,
  type PairHalf,
  type BeginRequest,
  type ContainerErrorDetail,
  type ContainerInfo,
  type DeclaredTool,
  type DivergeFrontMatter,
  type ErrorData as McpErrorData,
  type MultiplexedConnectionEvent,
  type NotificationStream,
  type NotificationsOptions,
  type OpenContainerOptions,
  type WebSocketConstructor as MultiplexedWebSocketConstructor,
} from "./container.js";
export { pipePostgres, databaseAddress, DATABASE_BUDGET, type DatabaseAddress, type PipePostgresOptions } from "./postgres.js";
