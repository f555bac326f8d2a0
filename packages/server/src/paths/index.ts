// The many-paths transport on the proxy: `/requests` and the MCP answer paths on the provider-facing
// listener (seed 000), and the MCP endpoint `/mcp` on the program-facing one.
import type { ProxyContext, ProxyPart } from "../context.js";
import { AskBoard } from "./board.js";
import { McpAsks } from "../families/mcp-outward/asks.js";
import type { ProgramMcpServer } from "../families/mcp-outward/program-mcp.js";
import { ProgramApi } from "../families/vault/paths.js";
import { FilesystemPaths } from "../families/filesystem/paths.js";
import { FuseMountPaths } from "../families/fuse/paths.js";
import { RequestsEngine } from "../exchanges/engine.js";
import { bindProviderPaths, bindProxyAsks, type ProxyAsks } from "../gen/exchanges.js";
import { PathsEngine } from "../exchanges/paths.js";
import { toolPathHandlers } from "../families/mcp-inward/paths.js";
import { PostgresOverRequests } from "../families/postgres/paths.js";
import { TransportChoice, type BeginScopeLink } from "../exchanges/begin-scope.js";

export { AskBoard, ANSWER_PATH_PREFIX, type RequestsKind, type PathEnding, type BoardEvent, type AnswerPath, type AskOwner } from "./board.js";
export { McpAsks, DEFAULT_MAX_PENDING_ASKS, asMcpAnswerError, type McpKind, type NotificationStreamEvent, type McpAskStats } from "../families/mcp-outward/asks.js";
export { McpExchangeError, type McpExchangeErrorDetail } from "../families/mcp-outward/errors.js";
// ProgramMcpServer, PROGRAM_MCP_SERVER_INFO and programErrorOf are exported from the package's index:
// re-exporting them here would load the MCP SDK's server with this module.
export { ProgramApi } from "../families/vault/paths.js";
export { toolPathHandlers, TOOL_NOTIFICATION_BUFFER } from "../families/mcp-inward/paths.js";
export { PostgresOverRequests, type PostgresOverRequestsStats } from "../families/postgres/paths.js";

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
  /**
   * The program-facing MCP server at `http://127.0.0.1:<program port>/mcp`: its counters, and the
   * server itself once made. It is made on the program's first request there (the MCP SDK's server
   * is loaded then, not at start); before that it has no sessions.
   */
  readonly programMcp: Pick<ProgramMcpServer, "sessionCount" | "progressRoutes"> & { readonly server: ProgramMcpServer | undefined };
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
  let programMcp: ProgramMcpServer | undefined;
  let making: Promise<ProgramMcpServer> | undefined;
  let closed = false;
  // Made on the program's first request to /mcp; requests made while it loads wait for it.
  const programServer = () =>
    (making ??= import("../families/mcp-outward/program-mcp.js").then(
      ({ ProgramMcpServer }) => (programMcp = new ProgramMcpServer(mcp, options.maxMessageBytes, { log: options.log, sessionIdleMs: options.programSessionIdleMs, maxSessions: options.maxProgramSessions })),
    ));
  provider.addUpgradeRoute(board);
  // `/tool/*`: the container's own MCP server, through the proxy's one inward MCP client.
  const providerPaths = new PathsEngine(bindProviderPaths(toolPathHandlers({ inward: context.inward, gate, log: options.log })), {
    maxMessageBytes: options.maxMessageBytes,
    maxStreamBacklogBytes: options.maxNotificationBacklogBytes,
    log: options.log,
  });
  provider.addUpgradeRoute(providerPaths);
  const postgres = new PostgresOverRequests(board, options.log);
  // /filesystem/tree, /filesystem/read and /filesystem/write, under the proxy's root.
  const filesystem = new FilesystemPaths({ root: options.root, maxWriteBacklogBytes: options.maxPairBacklogBytes, log: options.log });
  provider.addUpgradeRoute(filesystem);
  // /fuse/mount: mounts whose operations are asked on /requests (kinds 12–18).
  const fuseMounts = new FuseMountPaths({ root: options.root, asks, log: options.log });
  provider.addUpgradeRoute(fuseMounts);
  program.addRequestRoute((request, response, pathname) => {
    if (pathname !== "/mcp") return false;
    if (programMcp) return programMcp.route(request, response, pathname);
    programServer().then(
      (server) => {
        if (closed) response.destroy();
        else server.route(request, response, pathname);
      },
      (problem: unknown) => {
        options.log(`program /mcp: ${problem instanceof Error ? problem.message : String(problem)}`);
        response.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: "internal error" }, id: null }));
      },
    );
    return true;
  });
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
    programMcp: {
      get sessionCount() {
        return programMcp?.sessionCount ?? 0;
      },
      get progressRoutes() {
        return programMcp?.progressRoutes ?? 0;
      },
      get server() {
        return programMcp;
      },
    },
    providerPaths,
    postgres,
    async close() {
      closed = true;
      providerPaths.close();
      filesystem.close();
      await fuseMounts.close();
      mcp.close();
      programApi.close();
      board.close();
      await (programMcp ?? (await making?.catch(() => undefined)))?.close();
    },
  };
}
