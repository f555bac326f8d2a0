// The registry's multiplexed half (see index.ts): every family's adapter on the multiplexed
// connection, assembled into the tables the connection dispatches on. Imported by the connection
// only, so that what these adapters load (YAML for DIVERGE.md) loads with the connection, when the
// provider first connects on `/`, not at start.
import { logEvent } from "@diverge/multiplexer/log";
import { ContainerProxyRequestError, decodeContainerProxyRequest, type ContainerProxyRequest } from "@diverge/codec";
import type { Responder } from "@diverge/multiplexer";
import type { ToolsBeginChannelsProviderRoutes } from "../gen/exchanges.js";
import type { ConnectionServices, ScopeRoutes } from "../multiplexed/family.js";
import { agentsScopes } from "./agents/multiplexed.js";
import { toolsBegin } from "./tools/multiplexed.js";
import { realRoot } from "./filesystem/path-checks.js";
import { filesystemScopes } from "./filesystem/multiplexed.js";
import { fuseScopes } from "./fuse/multiplexed.js";
import { infoChannels } from "./info/multiplexed.js";
import { InwardMcpChannels } from "./mcp-inward/multiplexed.js";
import { postgresChannels } from "./postgres/multiplexed.js";
import { daemonChannels } from "./daemon/multiplexed.js";
import { secretsChannels } from "./secrets/multiplexed.js";

export type MultiplexedFamilies = ReturnType<typeof openMultiplexedFamilies>;

/** Every family's adapter on one connection. */
export function openMultiplexedFamilies(services: ConnectionServices) {
  let root: Promise<string> | undefined;
  // The proxy's root, resolved once on first use and shared by the families under it.
  const resolvedRoot = () => (root ??= realRoot(services.options.root));
  const fuse = fuseScopes(services, resolvedRoot);
  const filesystem = filesystemScopes(services, resolvedRoot);
  const postgres = postgresChannels(services);
  const daemon = daemonChannels(services);
  const inward = new InwardMcpChannels(services);
  // The channels both begin families serve alike (the seed: tags 0-2 are the same in both scopes, and
  // the secrets feed appears in each under a tag of its own): one adapter of each, shared.
  const shared = { ...postgres.channels, ...daemon.channels, ...infoChannels(services), ...secretsChannels(services) };
  /** What each channel the provider opens on a tools::begin scope does; which tag is which is the generated routing's business. */
  const toolsChannels: ToolsBeginChannelsProviderRoutes<Responder> = { ...shared, ...inward.channels };
  const tools = toolsBegin(services, toolsChannels);
  const agents = agentsScopes(services, shared);
  /** What each scope the provider opens does: the begins are the begin families', the rest the families' own. */
  const scopes: ScopeRoutes = {
    AgentsBegin: (request, responder) => agents.route(request, responder),
    ToolsBegin: (request, responder) => tools.route(request, responder),
    ...fuse.routes,
    ...filesystem.routes,
  };
  return {
    postgres: postgres.pairs,
    daemons: daemon.pairs,
    /** The agent's run loop, once this connection has begun an agent container. */
    get agentLoop() {
      return agents.loop;
    },
    /** A scope the provider opened: served by the family of its endpoint; an unreadable request gets a bare finish. */
    routeScope(responder: Responder, payload: Uint8Array): Promise<void> {
      let request: ContainerProxyRequest;
      try {
        request = decodeContainerProxyRequest(payload);
      } catch (error) {
        if (!(error instanceof ContainerProxyRequestError)) throw error;
        services.options.log(...logEvent(`unreadable request on scope ${responder.scope}: {error}`, { error: error.message }));
        responder.finish();
        return Promise.resolve();
      }
      return (scopes[request.variant] as (request: ContainerProxyRequest, responder: Responder) => Promise<void>)(request, responder);
    },
    /** A channel on a scope of a family's own (not the begin scope): true when that family took it. */
    claimsChannel: (responder: Responder) => filesystem.claimsChannel(responder),
    /** The connection ended: every family lets go of what it holds; resolves once the mounts are gone. */
    closeAll(): Promise<void> {
      inward.closeAll();
      postgres.pairs.closeAll();
      daemon.pairs.closeAll();
      // Nobody is left to answer the mounts' asks: they go (what waits fails with EIO).
      return fuse.closeAll();
    },
  };
}
