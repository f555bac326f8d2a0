// The registry of the provider's families: each family's adapters, per transport. The transport
// engines (multiplexed/, paths/) take what they carry from here and never name a family; the
// multiplexed connection's public methods (`info`, `feedSecrets`, `mcp`, `tree`, `mount`, …) are
// one-line delegations to the adapters listed here. Every family lives in its own folder:
//   mcp-inward/   the container's own MCP server       multiplexed (tags 3-7) · paths (/tool/*) · serve-tools
//   mcp-outward/  the program's /mcp, relayed here      multiplexed (generated dispatch only) · paths (kinds 0-4)
//   info/         DIVERGE.md                            multiplexed (tag 1)
//   secrets/      the secrets feed and its gate         multiplexed (tag 8)
//   postgres/     the program's database connections   multiplexed (pair, tag 0) · paths (kind 11, raw handler)
//   daemon/       the program's daemon connections     multiplexed (pair, tag 2)
//   vault/        the vault store                       both through the generated dispatch (no adapter)
//   command/      commands run by an executable        paths (kind 10: sent as the path drains; never a bare close once run)
//   filesystem/   filesystem::tree/read/write          multiplexed (endpoints 3-5) · paths (/filesystem/*)
//   fuse/         fuse::mount                           multiplexed (endpoint 2) · paths (/fuse/mount, kinds 12-18)
//   agents/       an agent container (agents::begin)    multiplexed (begin endpoint 0, tags 1/3/4/5) · paths (/agent/*) · a2a
import type { PairFamily } from "../multiplexed/pairs.js";
import type { PathsFamily } from "../paths/answering.js";
import type { ProviderHandlers } from "../gen/exchanges.js";
import { postgresPair, type PostgresPairOptions } from "./postgres/multiplexed.js";
import { daemonPair, type DaemonPairOptions } from "./daemon/multiplexed.js";
import { mcpOutwardPaths } from "./mcp-outward/paths.js";
import type { McpPathsHandlers } from "./mcp-outward/answering.js";
import { commandPaths } from "./command/paths.js";

// ── multiplexed ─────────────────────────────────────────────────────────────────────────────────
/** The options of `openContainer` the pair families read. */
export interface PairOptions extends PostgresPairOptions, DaemonPairOptions {}
/** The families whose connections the proxy announces on a channel of its own. */
export const pairFamilies: readonly PairFamily<PairOptions>[] = [postgresPair, daemonPair];
export { ContainerMcp, NotificationHub, type NotificationSinkState, type NotificationsOptions, type NotificationStream } from "./mcp-inward/multiplexed.js";
export { askInfo, type ContainerInfo } from "./info/index.js";
export { feedSecretsOn, SecretsGate } from "./secrets/index.js";
export { emptyReadFlowStats, readOn, treeOn, writeOn, type FilesystemHost, type ReadFlowStats, type ReadOptions, type TransferOptions, type TreeOptions, type TreeStream } from "./filesystem/multiplexed.js";
export type { WriteSource } from "./filesystem/queue.js";
export { mountOn, type MountOptions, type ProviderMount } from "./fuse/multiplexed.js";
export { beginAgentOn, type Agent, type AgentBeginRequest, type AgentScopeHost } from "./agents/index.js";
export { beginScopeHandlers } from "./mcp-outward/handlers.js";

// ── paths ───────────────────────────────────────────────────────────────────────────────────────
/** The families' own handler shapes, beside the generated ones, that `connectProxy` takes. */
export interface FamilyPathsHandlers extends McpPathsHandlers {}
/** The families with code of their own on the paths connection. */
export const pathsFamilies: readonly PathsFamily<ProviderHandlers & FamilyPathsHandlers>[] = [mcpOutwardPaths, commandPaths];
