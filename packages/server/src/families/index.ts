// The registry: every family's adapters, per transport. The transport engines (paths/, multiplexed/)
// iterate over what it assembles and never name a family.
//
//   family        multiplexed (begin scope of `/`)                  paths
//   mcp-inward    provider-opened tags 3-7                          /tool/*
//   mcp-outward   proxy-opened tags 7-11 (through the engine)       /requests kinds 0-4, the program's /mcp
//   info          provider-opened tag 1                             —
//   secrets       provider-opened tag 8 (and the gate)              —
//   postgres      pairs: proxy-opened tag 0, provider tag 0         /requests kind 11 + /postgres/{channel}
//   daemon        pairs: proxy-opened tag 1, provider tag 2         —
//   vault         proxy-opened tags 2-6 (through the engine)        /requests kinds 5-9, the program's /vault/*
//   command       —                                                 /requests kind 10, the program's /command
//   filesystem    filesystem::tree/read/write (endpoints 3-5)       /filesystem/*
//   fuse          fuse::mount (endpoint 2)                          /fuse/mount + /requests kinds 12-18
//   tools         tools::begin (endpoint 1): the begin                —
//   agents        agents::begin (endpoint 0): the begin, the run      /agent/register|run|schema|enqueue|dequeue
//                 loop, provider-opened tags 3-4 (0-2, 5 shared)
//
// This file holds what is attached at start: every family's paths adapters, and the program-facing
// side of the multiplexed transport (the postgres listener, `/daemon`). The per-connection half is
// multiplexed.ts beside it, imported by the connection only: what its adapters load (YAML for
// DIVERGE.md) loads with the connection, when the provider first connects on `/`, not at start.
import { PathsEngine } from "../exchanges/paths.js";
import { bindProviderPaths } from "../gen/exchanges.js";
import type { PathsServices } from "../paths/family.js";
import type { ProgramSideServices } from "../multiplexed/family.js";
import type { ProxyConnection } from "../multiplexed/connection.js";
import { AgentPaths } from "./agents/paths.js";
import { attachDaemonEndpoint } from "./daemon/endpoint.js";
import { attachPostgresListener } from "./postgres/listener.js";
import { CommandApi } from "./command/paths.js";
import { FilesystemPaths } from "./filesystem/paths.js";
import { FuseMountPaths } from "./fuse/paths.js";
import { toolPathHandlers } from "./mcp-inward/paths.js";
import { attachOutwardMcp } from "./mcp-outward/paths.js";
import type { McpAsks } from "./mcp-outward/asks.js";
import type { ProgramMcpServer } from "./mcp-outward/program-mcp.js";
import { PostgresOverRequests } from "./postgres/paths.js";
import { VaultApi } from "./vault/paths.js";

export type { MultiplexedFamilies } from "./multiplexed.js";

/** What the families on the paths transport show of themselves (part of the proxy's `paths`). */
export interface PathsFamilies {
  /** The MCP exchanges the proxy asks of its provider: `mcp.listTools(params?)`, …, notifications. */
  readonly mcp: McpAsks;
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

/** Every family's paths adapter, attached: the provider-facing paths after the engine's `/requests`, the program-facing ones. */
export function attachPathsFamilies(services: PathsServices): PathsFamilies & {
  /** Closes every family's paths; `closeBoard` is called once the asks are given up, before the program's MCP server closes. */
  close(closeBoard: () => void): Promise<void>;
} {
  const { context, board, asks } = services;
  const { options, provider, program, gate } = context;
  const outward = attachOutwardMcp(services);
  // `/tool/*`: the container's own MCP server, through the proxy's one inward MCP client.
  const providerPaths = new PathsEngine(bindProviderPaths(toolPathHandlers({ inward: context.inward, gate, log: options.log, canFeedSecrets: () => services.beginScope() !== undefined })), {
    maxMessageBytes: options.maxMessageBytes,
    maxStreamBacklogBytes: options.maxNotificationBacklogBytes,
    log: options.log,
  });
  provider.addUpgradeRoute(providerPaths);
  const postgres = new PostgresOverRequests(board, options.log);
  // /filesystem/tree, /filesystem/read and /filesystem/write, under the proxy's root.
  const filesystem = new FilesystemPaths({ root: options.root, maxWriteBacklogBytes: options.maxPairBacklogBytes, maxMessageBytes: options.maxMessageBytes, maxTreeWatches: options.maxTreeWatches, log: options.log });
  provider.addUpgradeRoute(filesystem);
  // /fuse/mount: mounts whose operations are asked on /requests (kinds 12–18).
  const fuseMounts = new FuseMountPaths({ root: options.root, asks, log: options.log, maxMessageBytes: options.maxMessageBytes, requestsOpen: () => board.requestsOpen, requestsConnection: () => board.connection });
  provider.addUpgradeRoute(fuseMounts);
  // /agent/*: straight relays to an agent program.
  const agentPaths = new AgentPaths({ appPort: () => options.appPort, maxMessageBytes: options.maxMessageBytes, log: options.log });
  provider.addUpgradeRoute(agentPaths);
  outward.route();
  // The command and vault APIs beside /mcp; a body is at most one message less the ask's header.
  const command = new CommandApi(asks, options.maxMessageBytes - 16, options.log);
  program.addRequestRoute(command.route);
  const vault = new VaultApi(asks, options.maxMessageBytes - 16);
  program.addRequestRoute(vault.route);
  return {
    mcp: outward.mcp,
    programMcp: outward.programMcp,
    providerPaths,
    postgres,
    async close(closeBoard) {
      outward.stopServing();
      providerPaths.close();
      filesystem.close();
      agentPaths.close();
      await fuseMounts.close();
      outward.closeAsks();
      command.close();
      vault.close();
      closeBoard();
      await outward.closeServer();
    },
  };
}

/**
 * The program-facing side of the multiplexed transport: `/daemon`, then the postgres listener (a
 * driver is carried on `/requests` by the paths' postgres while no provider has begun on `/`).
 */
export async function attachProgramSides(services: ProgramSideServices<ProxyConnection>, paths?: Pick<PathsFamilies, "postgres">) {
  const daemon = attachDaemonEndpoint(services);
  const postgres = await attachPostgresListener(services, paths?.postgres);
  return {
    pgPort: postgres.pgPort,
    postgresStats: postgres.stats,
    daemonStats: daemon.stats,
    /** No more program connections are carried elsewhere: the proxy is closing. */
    stopCarrying: postgres.stopCarrying,
    /** The program connections and listeners go, once the held ones are closed. */
    close: postgres.close,
  };
}
