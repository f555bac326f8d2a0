// The registry's multiplexed half (see index.ts): every family's adapter on the multiplexed
// connection, assembled into the tables the connection dispatches on. Imported by the connection
// only, so that what these adapters load (YAML for DIVERGE.md) loads with the connection, when the
// provider first connects on `/`, not at start.
import type { ToolsBeginChannelRequest } from "@diverge/codec";
import type { Responder } from "@diverge/multiplexer";
import { routeToolsBeginChannelsProviderChannel, type ToolsBeginChannelsProviderRoutes } from "../gen/exchanges.js";
import type { ConnectionServices, ScopeRoutes } from "../multiplexed/family.js";
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
  /** What each channel the provider opens on the begin scope does; which tag is which is the generated routing's business. */
  const channels: ToolsBeginChannelsProviderRoutes<Responder> = {
    ...postgres.channels,
    ...daemon.channels,
    ...infoChannels(services),
    ...secretsChannels(services),
    ...inward.channels,
  };
  /** What each scope the provider opens for an endpoint other than the begin does. */
  const scopes: Omit<ScopeRoutes, "ToolsBegin"> = { ...fuse.routes, ...filesystem.routes };
  return {
    postgres: postgres.pairs,
    daemons: daemon.pairs,
    scopes,
    /** A channel on a scope of a family's own (not the begin scope): true when that family took it. */
    claimsChannel: (responder: Responder) => filesystem.claimsChannel(responder),
    routeChannel: (request: ToolsBeginChannelRequest, responder: Responder) => routeToolsBeginChannelsProviderChannel(request, channels, responder),
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
