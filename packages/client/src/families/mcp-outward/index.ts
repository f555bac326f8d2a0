// The outward MCP family: the program's /mcp asks, relayed by the proxy to the provider, answered
// here (by handlers, or by forwarding to a real MCP server with `relayToMcp`). Defined by
// spec/2.3.0/requests.yaml and spec/2.3.0/exchanges.yaml (/requests kinds 0-4), spec/2.3.0/tools-begin-channels.yaml (proxy-opened
// tags 7-11) and spec/2.3.0/mcp.yaml, ../shared/protocol/paths.md §3 and
// ../shared/protocol/multiplexed.md §10.10-§10.11 and §12.
export { mcpProviderHandlers } from "./handlers.js";
export { relayToMcp, type McpTarget, type RelayOptions, type McpRelay } from "./relay.js";
export type { McpAnswer, AskInfo, NotificationSink, McpPathsHandlers } from "./answering.js";
export { mcpOutwardPaths } from "./paths.js";
