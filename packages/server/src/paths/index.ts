// The many-paths transport on the proxy: `/requests` and the MCP answer paths on the provider-facing
// listener (seed 000), and the MCP endpoint `/mcp` on the program-facing one.
import type { ProxyContext, ProxyPart } from "../proxy.js";
import { AskBoard } from "./board.js";
import { McpAsks } from "./mcp.js";
import type { ProgramMcpServer } from "./program-mcp.js";

export { AskBoard, ANSWER_SEGMENT, type McpKind, type PathEnding, type BoardEvent, type AnswerPath, type AskOwner } from "./board.js";
export { McpAsks, DEFAULT_MAX_PENDING_ASKS, asMcpAnswerError, type NotificationStreamEvent, type McpAskStats } from "./mcp.js";
export { McpExchangeError, type McpExchangeErrorDetail } from "./errors.js";
// ProgramMcpServer, PROGRAM_MCP_SERVER_INFO and programErrorOf are exported from the package's index:
// re-exporting them here would load the MCP SDK's server with this module.

export interface PathsPart extends ProxyPart {
  /** The MCP exchanges the proxy asks of its provider: `mcp.listTools(params?)`, …, notifications. */
  readonly mcp: McpAsks;
  /** The asking machinery itself: its events say what happens on `/requests` and the answer paths. */
  readonly board: AskBoard;
  /**
   * The program-facing MCP server at `http://127.0.0.1:<program port>/mcp`: its counters, and the
   * server itself once made. It is made on the program's first request there (the MCP SDK's server
   * is loaded then, not at start); before that it has no sessions.
   */
  readonly programMcp: Pick<ProgramMcpServer, "sessionCount" | "progressRoutes"> & { readonly server: ProgramMcpServer | undefined };
}

export function attachPaths(context: ProxyContext): PathsPart {
  const { options, provider, program, gate } = context;
  const board = new AskBoard(options.maxMessageBytes);
  const mcp = new McpAsks({ board, gate, log: options.log, maxPendingAsks: options.maxPendingAsks });
  let programMcp: ProgramMcpServer | undefined;
  let making: Promise<ProgramMcpServer> | undefined;
  let closed = false;
  // Made on the program's first request to /mcp; requests made while it loads wait for it.
  const programServer = () =>
    (making ??= import("./program-mcp.js").then(
      ({ ProgramMcpServer }) => (programMcp = new ProgramMcpServer(mcp, options.maxMessageBytes, { log: options.log, sessionIdleMs: options.programSessionIdleMs, maxSessions: options.maxProgramSessions })),
    ));
  provider.addUpgradeRoute(board);
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
  board.onEvent((event) => {
    if (event.type === "requestsOpened") options.log(`/requests connection ${event.connection} opened`);
    else if (event.type === "requestsClosed") options.log(`/requests connection ${event.connection} closed; ${event.reasked} ask(s) to ask again`);
  });
  return {
    mcp,
    board,
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
    async close() {
      closed = true;
      mcp.close();
      board.close();
      await (programMcp ?? (await making?.catch(() => undefined)))?.close();
    },
  };
}
