// mcp-inward: the container's own MCP server, reached through the proxy's one inward MCP client
// (shared.ts, inward-mcp.ts). Multiplexed: the begin scope's provider-opened channels 3-7
// (multiplexed.ts); paths: `/tool/*` (paths.ts). Spec: spec/2.3.0/tools-begin.yaml,
// tools-begin-channels.yaml, tool.yaml, mcp.yaml; ../shared/protocol/multiplexed.md §9.4–§9.8, §12,
// paths.md §4.
export { SharedInwardMcp } from "./shared.js";
export type { InwardMcp, ExchangeOptions, InwardExchange, InwardListener, McpOutcome, ErrorData } from "./inward-mcp.js";
export { InwardMcpChannels } from "./multiplexed.js";
export { toolPathHandlers, TOOL_NOTIFICATION_BUFFER, type ToolPathsOptions } from "./paths.js";
