// What every part of the proxy is given, and the options it is started with: shared by the proxy
// (proxy.ts) and both transports, so neither transport imports the proxy that attaches it.
import type { Say } from "@diverge/multiplexer/log";
import type { Server as NetServer } from "node:net";
import { tmpdir } from "node:os";
import { SpillPool, speakRevision, type SpokenRevision } from "@diverge/multiplexer";
import { resolveBindOptions } from "./bind.js";
import type { Gate } from "./families/secrets/gate.js";
import type { RouteListener } from "./listener.js";
import type { SharedInwardMcp } from "./families/mcp-inward/shared.js";
import { DEFAULT_MAX_PENDING_ASKS } from "./families/mcp-outward/asks.js";
import { DEFAULT_PAIR_BACKLOG_BYTES, DEFAULT_PAIR_BUDGET_BYTES, DEFAULT_PAIR_SPILL_BYTES, DEFAULT_PAIR_STALL_MS, DEFAULT_SPILL_BYTES } from "./multiplexed/pairs.js";

export interface ProxyOptions {
  /** The spec revision to speak (see `SPOKEN_REVISIONS`). Default the newest; another is a RevisionError. */
  readonly revision?: string;
  /** Provider-facing interface; the spec says every interface ("0.0.0.0"). Default "127.0.0.1" for library use. */
  readonly host?: string;
  /** Provider-facing port (`/`, `/requests`, answer paths). Default 14979; 0 picks a free one. */
  readonly port?: number;
  /** Loopback port for the program: its MCP endpoint at `/mcp`, the daemon endpoint at `/daemon`. Default 14980; 0 picks one. */
  readonly programPort?: number;
  /** The program's own HTTP server (`/register`, `/secrets`, `/mcp`). Default `$PORT`, else 8080. */
  readonly appPort?: number;
  /**
   * The container root: `DIVERGE.md` is read there, and the filesystem endpoints (tree, read,
   * write) see and touch nothing outside it, whatever links inside it point to. Default "/".
   */
  readonly root?: string;
  /** Loopback port where the program's database driver connects. Default 14981; 0 picks one. */
  readonly pgPort?: number;
  /** Hold every MCP exchange until the first `Fed` of a secrets feed. Default true. */
  readonly secretsGate?: boolean;
  /** Largest message accepted on any path, in bytes. Default 16 MiB. */
  readonly maxMessageBytes?: number;
  /** MCP exchanges the proxy may have waiting for the provider's answers at once; more fail with `TooManyPending`. Default 10 000. */
  readonly maxPendingAsks?: number;
  /** Channels the provider may hold open at once on the multiplexed connection; a channel request beyond it gets a bare finish. Default 4096. */
  readonly maxOpenChannels?: number;
  /** Scopes the provider may hold open at once on the multiplexed connection; a request beyond it gets a bare finish. Default 64. */
  readonly maxOpenScopes?: number;
  /** Bytes that may wait in the multiplexed connection's send buffer before a tag-7 channel drops notifications (counted in `stats()`). Default 8 MiB. */
  readonly maxNotificationBacklogBytes?: number;
  /**
   * The hard cap: bytes from the provider one program socket (a database driver's, a daemon
   * connection's) may hold unread; beyond it that pair ends, and only it. The budget pauses the
   * connection long before, so only a connection that cannot pause reaches it. Also the content bytes
   * a filesystem write may hold before they reach the disk. Default 64 MiB.
   */
  readonly maxPairBacklogBytes?: number;
  /**
   * Bytes from the provider one program socket may hold unread before its pair pauses reading the
   * multiplexed connection (every channel waits) until the socket drains to a quarter of it; at most
   * half of `maxPairBacklogBytes`. Default 2 MiB (the proxy's memory per slow pair: see the README).
   */
  readonly pairBudgetBytes?: number;
  /**
   * Only with spilling off (`maxPairSpillBytes` 0): how long a pair may keep the connection paused
   * while its program reads nothing before that pair ends, in ms. Default 10 000.
   */
  readonly pairStallMs?: number;
  /**
   * Bytes one pair (a database driver's, a daemon connection's) may hold in a temporary file when its
   * program reads slower than the provider sends: past `pairBudgetBytes` in memory, the rest waits on
   * disk and goes to the program in order as it reads, so a slow reader neither stalls the other
   * channels nor is cut; past this cap its pair ends, and only it. 0 turns spilling off (then the
   * budget pauses the connection and `pairStallMs` applies). Default 1 GiB (nginx's
   * `proxy_max_temp_file_size`).
   */
  readonly maxPairSpillBytes?: number;
  /** Bytes every pair of the proxy together may hold on disk; a pair that would go past it ends. Default 4 GiB. */
  readonly maxSpillBytes?: number;
  /** The directory of the pairs' temporary files (each removed from it as soon as it is opened). Default the OS's temporary directory. */
  readonly spillDir?: string;
  /** Program connections (database drivers, `/daemon` dials) held before the provider has begun; more are closed (drivers) or refused with 503 (`/daemon`). Default 256. */
  readonly maxHeldConnections?: number;
  /**
   * Directories one tree watches at most (one inotify watch each, ~2–3 KB of the proxy's memory);
   * past it a directory is sent with `changes: false`, with everything under it (fs-fuse.md §5.2).
   * Default: no cap but the kernel's (`fs.inotify.max_user_watches`).
   */
  readonly maxTreeWatches?: number;
  /**
   * `Host` names the program-facing listener accepts besides `localhost`, `127.0.0.1` and `[::1]`
   * (any port); `"*"` accepts any. Every other `Host` is refused with 403 (DNS-rebinding protection).
   */
  readonly allowedHosts?: readonly string[];
  /**
   * `Origin`s (`scheme://host[:port]`) the program-facing listener accepts besides loopback ones;
   * `"*"` accepts any. A request with any other `Origin` is refused with 403; one without is not checked.
   */
  readonly allowedOrigins?: readonly string[];
  /**
   * `Origin`s the provider-facing port accepts besides loopback ones (`"*"`: any); its `Host` is never
   * checked. A handshake with any other `Origin` (a browser's, from a page elsewhere) is refused with
   * 403; one without (every provider client but a browser) is not checked.
   */
  readonly allowedProviderOrigins?: readonly string[];
  /** A program MCP session with no request in flight and no notification stream open is released after this long, in ms. Default 300 000 (5 minutes). */
  readonly programSessionIdleMs?: number;
  /** Program MCP sessions held at once; an `initialize` beyond it releases the oldest quiet session, or gets 503 when none is quiet. Default 1000. */
  readonly maxProgramSessions?: number;
  /**
   * Where the proxy reports what happens: one line of text a call (control characters escaped), and
   * with it, when the line carries outside text (a path, a reason, an error's message), the same as
   * a fixed message and its fields (`@diverge/multiplexer/log`). Never given a secret value on
   * purpose; `onSecretsFed` names them, for a log to redact whatever form reaches it. Default: silent.
   */
  readonly log?: Say;
  /** Told the secret values the provider feeds, before the program gets them (the CLI's log redacts them in every form). */
  readonly onSecretsFed?: (values: readonly string[]) => void;
}

export interface ResolvedProxyOptions extends Required<Omit<ProxyOptions, "log" | "revision" | "allowedHosts" | "allowedOrigins" | "allowedProviderOrigins" | "onSecretsFed">> {
  /** Every pair's disk use together (`maxSpillBytes`, `spillDir`): one per proxy. */
  readonly spillPool: SpillPool;
  readonly allowedHosts: readonly string[];
  readonly allowedOrigins: readonly string[];
  readonly allowedProviderOrigins: readonly string[];
  readonly revision: SpokenRevision;
  readonly log: Say;
  readonly onSecretsFed?: (values: readonly string[]) => void;
}

/** What every part of the proxy is given. */
export interface ProxyContext {
  readonly options: ResolvedProxyOptions;
  /** Provider-facing: `/`, `/requests`, `/mcp/<kind>/{channel}`, … */
  readonly provider: RouteListener;
  /** Program-facing, loopback only: `/mcp`, `/daemon`. */
  readonly program: RouteListener;
  readonly gate: Gate;
  /**
   * The proxy's one MCP client to the container's own MCP server (`http://127.0.0.1:<app port>/mcp`),
   * dialled on first use and again when its transport died; the begin scope's MCP channels and the
   * paths transport's `/tool/*` share it.
   */
  readonly inward: SharedInwardMcp;
  /** The postgres listener, when it was bound before the parts were attached. */
  readonly pgServer?: NetServer;
}

export interface ProxyPart {
  close(): Promise<void>;
}

export const DEFAULT_MAX_OPEN_CHANNELS = 4096;
export const DEFAULT_MAX_OPEN_SCOPES = 64;
export const DEFAULT_NOTIFICATION_BACKLOG_BYTES = 8 * 1024 * 1024;
export const DEFAULT_MAX_HELD_CONNECTIONS = 256;
export const DEFAULT_PROGRAM_SESSION_IDLE_MS = 300_000;
export const DEFAULT_MAX_PROGRAM_SESSIONS = 1000;

export function resolveOptions(options: ProxyOptions = {}): ResolvedProxyOptions {
  const envPort = Number(process.env.PORT);
  const bind = resolveBindOptions(options);
  return {
    revision: speakRevision(options.revision),
    host: bind.host,
    port: bind.port,
    programPort: bind.programPort,
    appPort: options.appPort ?? (Number.isInteger(envPort) && envPort > 0 ? envPort : 8080),
    root: options.root ?? "/",
    pgPort: bind.pgPort,
    secretsGate: options.secretsGate ?? true,
    maxMessageBytes: bind.maxMessageBytes,
    maxPendingAsks: options.maxPendingAsks ?? DEFAULT_MAX_PENDING_ASKS,
    maxOpenChannels: options.maxOpenChannels ?? DEFAULT_MAX_OPEN_CHANNELS,
    maxOpenScopes: options.maxOpenScopes ?? DEFAULT_MAX_OPEN_SCOPES,
    maxNotificationBacklogBytes: options.maxNotificationBacklogBytes ?? DEFAULT_NOTIFICATION_BACKLOG_BYTES,
    maxPairBacklogBytes: options.maxPairBacklogBytes ?? DEFAULT_PAIR_BACKLOG_BYTES,
    pairBudgetBytes: options.pairBudgetBytes ?? DEFAULT_PAIR_BUDGET_BYTES,
    pairStallMs: options.pairStallMs ?? DEFAULT_PAIR_STALL_MS,
    maxPairSpillBytes: options.maxPairSpillBytes ?? DEFAULT_PAIR_SPILL_BYTES,
    maxSpillBytes: options.maxSpillBytes ?? DEFAULT_SPILL_BYTES,
    spillDir: options.spillDir ?? tmpdir(),
    spillPool: new SpillPool(options.maxSpillBytes ?? DEFAULT_SPILL_BYTES, options.spillDir ?? tmpdir()),
    maxHeldConnections: options.maxHeldConnections ?? DEFAULT_MAX_HELD_CONNECTIONS,
    maxTreeWatches: options.maxTreeWatches ?? Infinity,
    allowedHosts: bind.allowedHosts,
    allowedOrigins: bind.allowedOrigins,
    allowedProviderOrigins: bind.allowedProviderOrigins,
    programSessionIdleMs: options.programSessionIdleMs ?? DEFAULT_PROGRAM_SESSION_IDLE_MS,
    maxProgramSessions: options.maxProgramSessions ?? DEFAULT_MAX_PROGRAM_SESSIONS,
    log: options.log ?? (() => {}),
    onSecretsFed: options.onSecretsFed,
  };
}
