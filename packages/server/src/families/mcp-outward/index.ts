// mcp-outward: the program's MCP, relayed to the provider: the five exchanges the proxy asks
// (asks.ts, errors.ts) and the program-facing `/mcp` that turns the program's requests into them
// (program-mcp.ts, loaded on the program's first request). Carried on `/requests` kinds 0-4 and their
// answer paths, or on the begin scope's proxy-opened tags 7-11 once a provider has begun (the
// exchange engine chooses; paths.ts attaches it). Spec: spec/2.3.0/exchanges.yaml, requests.yaml,
// mcp.yaml, tools-begin-channels.yaml; ../shared/protocol/paths.md §2–§3, multiplexed.md §10.10–§10.11.
export { McpAsks, DEFAULT_MAX_PENDING_ASKS, DEFAULT_MCP_TIMEOUT_MS, asMcpAnswerError, type McpRequestOptions, type McpKind, type NotificationStreamEvent, type McpAskStats, type McpAsksOptions } from "./asks.js";
export { McpExchangeError, type McpExchangeErrorDetail } from "./errors.js";
// Types only: the server itself would load the MCP SDK's server.
export type { ProgramMcpServer, ProgramMcpOptions } from "./program-mcp.js";
export { attachOutwardMcp } from "./paths.js";
