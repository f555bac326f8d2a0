// The many-paths transport on the proxy: `/requests` and the MCP answer paths on the provider-facing
// listener (seed 000), and the MCP endpoint `/mcp` on the program-facing one.
import type { ProxyContext, ProxyPart } from "../proxy.js";
import { AskBoard } from "./board.js";
import { McpAsks } from "./mcp.js";
import { ProgramMcpServer } from "./program-mcp.js";
import { ProgramApi } from "./program-api.js";
import { RequestsEngine } from "../exchanges/engine.js";
import { bindProviderPaths, bindProxyAsks, type ProxyAsks } from "../gen/exchanges.js";
import { PathsEngine } from "../exchanges/paths.js";
import { toolPathHandlers } from "./tool.js";
import { PostgresOverRequests } from "./postgres.js";
import { TransportChoice, type BeginScopeLink } from "../exchanges/begin-scope.js";

export { AskBoard, ANSWER_PATH_PREFIX, type RequestsKind, type PathEnding, type BoardEvent, type AnswerPath, type AskOwner } from "./board.js";
export { McpAsks, DEFAULT_MAX_PENDING_ASKS, asMcpAnswerError, type McpKind, type NotificationStreamEvent, type McpAskStats } from "./mcp.js";
export { McpExchangeError, type McpExchangeErrorDetail } from "./errors.js";
export { ProgramMcpServer, PROGRAM_MCP_SERVER_INFO, STREAM_GRACE_MS, programErrorOf, type ProgramMcpOptions } from "./program-mcp.js";
export { ProgramApi } from "./program-api.js";
export { toolPathHandlers, TOOL_NOTIFICATION_BUFFER } from "./tool.js";
export { PostgresOverRequests, type PostgresOverRequestsStats } from "./postgres.js";

export interface PathsPart extends ProxyPart {
  /** The MCP exchanges the proxy asks of its provider: `mcp.listTools(params?)`, …, notifications. */
  readonly mcp: McpAsks;
  /** The asking machinery itself: its events say what happens on `/requests` and the answer paths. */
  readonly board: AskBoard;
  /**
   * Every exchange of the `/requests` table the proxy can ask, typed (generated from the spec). One
   * with a begin-scope channel goes on that scope once a provider has begun tools on `/`.
   */
  readonly asks: ProxyAsks;
  /** Where the begin scope is, while one is begun: the multiplexed part tells. */
  useBeginScope(source: () => BeginScopeLink | undefined): void;
  /** The program-facing MCP server at `http://127.0.0.1:<program port>/mcp`. */
  readonly programMcp: ProgramMcpServer;
  /** The paths the provider opens (`/tool/*`), served from the generated handlers' table. */
  readonly providerPaths: PathsEngine;
  /** The program's database connections carried on `/requests` kind 11 while no provider has begun on `/`. */
  readonly postgres: PostgresOverRequests;
}

export function attachPaths(context: ProxyContext): PathsPart {
  const { options, provider, program, gate } = context;
  const board = new AskBoard(options.maxMessageBytes);
  let beginScope: () => BeginScopeLink | undefined = () => undefined;
  const choice = new TransportChoice(() => beginScope(), new RequestsEngine({ board, log: options.log }));
  const asks = bindProxyAsks(choice);
  // The program's outward MCP: on the begin scope once a provider has begun tools on `/` (tags 7-11), else on `/requests`.
  const mcp = new McpAsks({ board, gate, log: options.log, maxPendingAsks: options.maxPendingAsks, engine: choice, beginScope: () => beginScope() });
  const programMcp = new ProgramMcpServer(mcp, options.maxMessageBytes, { log: options.log, sessionIdleMs: options.programSessionIdleMs });
  provider.addUpgradeRoute(board);
  // `/tool/*`: the container's own MCP server, through the proxy's one inward MCP client.
  const providerPaths = new PathsEngine(bindProviderPaths(toolPathHandlers({ inward: context.inward, gate, log: options.log })), {
    maxMessageBytes: options.maxMessageBytes,
    maxStreamBacklogBytes: options.maxNotificationBacklogBytes,
    log: options.log,
  });
  provider.addUpgradeRoute(providerPaths);
  const postgres = new PostgresOverRequests(board, options.log);
  program.addRequestRoute(programMcp.route);
  // The vault and command API beside /mcp; a body is at most one message less the ask's header.
  const programApi = new ProgramApi(asks, options.maxMessageBytes - 16, options.log);
  program.addRequestRoute(programApi.route);
  board.onEvent((event) => {
    if (event.type === "requestsOpened") options.log(`/requests connection ${event.connection} opened`);
    else if (event.type === "requestsClosed") options.log(`/requests connection ${event.connection} closed; ${event.reasked} ask(s) to ask again`);
  });
  return {
    mcp,
    board,
    asks,
    useBeginScope(source) {
      beginScope = source;
    },
    programMcp,
    providerPaths,
    postgres,
    async close() {
      providerPaths.close();
      mcp.close();
      programApi.close();
      board.close();
      await programMcp.close();
    },
  };
}
