// The inward MCP family: the container's own MCP server as the provider reaches it (list and call its
// tools, list and read its resources, its notifications), and serving it to any MCP client
// (`--serve-tools`). Defined by spec/2.3.0/tools-begin-channels.yaml (provider-opened tags 3-7),
// spec/2.3.0/tool.yaml and spec/2.3.0/mcp.yaml, ../shared/protocol/multiplexed.md §9.4-§9.8 and §12
// (MCP frames) and ../shared/protocol/paths.md §4 (/tool/*).
export { ContainerMcp, NotificationHub, type NotificationSinkState, type NotificationsOptions, type NotificationStream } from "./multiplexed.js";
export { PathsTools, ToolPathError, isSecretsGateRefusal, pathsGateWarning, type ToolPathErrorDetail } from "./paths.js";
export { serveToolsHttp, serveToolsStdio, parseHostPort, type RelayedMethod, type ToolsSource, type ServeToolsOptions, type ServeToolsHttpOptions, type ServingTools, type SourceCallOptions } from "./serve-tools.js";
