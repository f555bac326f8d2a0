// The many-paths transport on the proxy: `/requests` and the answer paths on the provider-facing
// listener (seed 000), through the ask board and the exchange engine. Every family's paths (the
// program-facing `/mcp`, `/vault/*`, `/command`; the provider-opened `/tool/*`, `/filesystem/*`,
// `/fuse/mount`, `/postgres/{channel}`) are attached from the registry (families/index.ts).
import type { ProxyContext, ProxyPart } from "../context.js";
import { AskBoard } from "./board.js";
import { RequestsEngine } from "../exchanges/engine.js";
import { bindProxyAsks, type ProxyAsks } from "../gen/exchanges.js";
import { TransportChoice, type BeginScopeLink } from "../exchanges/begin-scope.js";
import { attachPathsFamilies, type PathsFamilies } from "../families/index.js";

export { AskBoard, ANSWER_PATH_PREFIX, type RequestsKind, type PathEnding, type BoardEvent, type AnswerPath, type AskOwner } from "./board.js";
// What the families' paths adapters export, for the package's index (ProgramMcpServer,
// PROGRAM_MCP_SERVER_INFO and programErrorOf are exported from there directly: re-exporting them
// here would load the MCP SDK's server with this module).
export { McpAsks, DEFAULT_MAX_PENDING_ASKS, DEFAULT_MCP_TIMEOUT_MS, asMcpAnswerError, type McpRequestOptions, type McpKind, type NotificationStreamEvent, type McpAskStats } from "../families/mcp-outward/asks.js";
export { McpExchangeError, type McpExchangeErrorDetail } from "../families/mcp-outward/errors.js";
export { toolPathHandlers, TOOL_NOTIFICATION_BUFFER } from "../families/mcp-inward/paths.js";
export { PostgresOverRequests, type PostgresOverRequestsStats } from "../families/postgres/paths.js";

export interface PathsPart extends ProxyPart, PathsFamilies {
  /** The asking machinery itself: its events say what happens on `/requests` and the answer paths. */
  readonly board: AskBoard;
  /**
   * Every exchange of the `/requests` table the proxy can ask, typed (generated from the spec). One
   * with a begin-scope channel goes on that scope once a provider has begun tools on `/`.
   */
  readonly asks: ProxyAsks;
  /** Where the begin scope is, while one is begun: the multiplexed part tells. */
  useBeginScope(source: () => BeginScopeLink | undefined): void;
}

export function attachPaths(context: ProxyContext): PathsPart {
  const { options, provider } = context;
  const board = new AskBoard(options.maxMessageBytes);
  let beginScope: () => BeginScopeLink | undefined = () => undefined;
  const choice = new TransportChoice(() => beginScope(), new RequestsEngine({ board, log: options.log }), options.maxMessageBytes);
  const asks = bindProxyAsks(choice);
  provider.addUpgradeRoute(board);
  const families = attachPathsFamilies({ context, board, engine: choice, asks, beginScope: () => beginScope() });
  board.onEvent((event) => {
    if (event.type === "requestsOpened") options.log(`/requests connection ${event.connection} opened`);
    else if (event.type === "requestsClosed") options.log(`/requests connection ${event.connection} closed; ${event.reasked} ask(s) to ask again`);
  });
  return {
    mcp: families.mcp,
    board,
    asks,
    useBeginScope(source) {
      beginScope = source;
    },
    programMcp: families.programMcp,
    providerPaths: families.providerPaths,
    postgres: families.postgres,
    async close() {
      await families.close(() => board.close());
    },
  };
}
