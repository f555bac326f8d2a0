// The program's outward MCP on the paths transport: the asks (kinds 0-4 on `/requests`, or
// proxy-opened tags 7-11 on the begin scope once a provider has begun) and the program-facing MCP
// endpoint `/mcp` that turns the program's requests into them.
import { logEvent } from "@diverge/multiplexer/log";
import type { PathsServices } from "../../paths/family.js";
import { McpAsks } from "./asks.js";
import type { ProgramMcpServer } from "./program-mcp.js";

export function attachOutwardMcp({ context, board, engine, beginScope }: PathsServices) {
  const { options, program, gate } = context;
  // The program's outward MCP: on the begin scope once a provider has begun tools on `/` (tags 7-11), else on `/requests`.
  const mcp = new McpAsks({ board, gate, log: options.log, maxPendingAsks: options.maxPendingAsks, engine, beginScope });
  let programMcp: ProgramMcpServer | undefined;
  let making: Promise<ProgramMcpServer> | undefined;
  let closed = false;
  // Made on the program's first request to /mcp; requests made while it loads wait for it.
  const programServer = () =>
    (making ??= import("./program-mcp.js").then(
      ({ ProgramMcpServer }) => (programMcp = new ProgramMcpServer(mcp, options.maxMessageBytes, { log: options.log, sessionIdleMs: options.programSessionIdleMs, maxSessions: options.maxProgramSessions })),
    ));
  const route = () =>
    program.addRequestRoute((request, response, pathname) => {
      if (pathname !== "/mcp") return false;
      if (programMcp) return programMcp.route(request, response, pathname);
      programServer().then(
        (server) => {
          if (closed) response.destroy();
          else server.route(request, response, pathname);
        },
        (problem: unknown) => {
          options.log(...logEvent("program /mcp: {error}", { error: problem instanceof Error ? problem.message : String(problem) }));
          response.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: "internal error" }, id: null }));
        },
      );
      return true;
    });
  return {
    mcp,
    /** Serves `/mcp` on the program-facing listener. */
    route,
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
    /** The proxy is closing: a request that waited for the server to load is cut rather than served. */
    stopServing() {
      closed = true;
    },
    /** The asks go: whatever waits for an answer ends. */
    closeAsks() {
      mcp.close();
    },
    /** The program-facing MCP server goes, once it is made (or failed to be). */
    async closeServer() {
      await (programMcp ?? (await making?.catch(() => undefined)))?.close();
    },
  };
}
