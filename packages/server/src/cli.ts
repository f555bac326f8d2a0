#!/usr/bin/env node
// diverge-proxy: the proxy as a program, placed beside a container's entrypoint.
//
// It binds its ports first and says so, then loads the proxy (proxy.js and what it imports: the
// codec, the multiplexer, the parts); what arrives meanwhile waits and is served once they are
// attached. Only Node's own modules and bind.js/listener.js are imported before the listening line
// (and, with --log-format json, the log: @diverge/multiplexer/log).
import { parseArgs } from "node:util";
import { bindPorts, DEFAULT_PG_PORT, DEFAULT_PROGRAM_PORT, PROXY_PORT } from "./bind.js";
import { DEFAULT_MAX_MESSAGE_BYTES } from "./listener.js";
import type { ProxyOptions } from "./proxy.js";
import { FUSE_CACHE_LEVELS, setDefaultFuseCache, type FuseCacheLevel } from "./families/fuse/common.js";

/** The revisions spoken, from the multiplexer: loaded only for the help text and `--revision`. */
const spoken = async () => (await import("@diverge/multiplexer")).SPOKEN_REVISIONS;

const helpText = (SPOKEN_REVISIONS: readonly string[]) => `Usage: diverge-proxy [flags]

The proxy side of the Diverge container-proxy protocol. Serves the provider on one
port (the multiplexed connection on /, and /requests with its answer paths) and the program beside
it on loopback (its MCP endpoint at http://127.0.0.1:<program-port>/mcp, the daemon at /daemon).

Flags:
  --port <n>               provider-facing port (default ${PROXY_PORT})
  --host <h>               provider-facing interface (default 0.0.0.0, every interface, as the
                           spec places it; the library's default is 127.0.0.1)
  --program-port <n>       loopback port for the program: MCP at /mcp (default ${DEFAULT_PROGRAM_PORT})
  --app-port <n>           the program's own HTTP server (default $PORT, else 8080)
  --root <dir>             the container root: DIVERGE.md is read there, and filesystem::tree/
                           read/write and /filesystem/* never leave it (default /, with a
                           warning)
  --pg-port <n>            loopback port for the program's database driver (default ${DEFAULT_PG_PORT})
  --no-secrets-gate        serve MCP exchanges before the program has taken its secrets
  --max-message-bytes <n>  largest message accepted on any path (default ${DEFAULT_MAX_MESSAGE_BYTES})
  --max-pending-asks <n>   outward MCP exchanges waiting for answers at once; more fail (default 10000)
  --max-open-channels <n>  channels the provider may hold open on / at once; more get a bare
                           finish (default 4096)
  --max-open-scopes <n>    scopes the provider may hold open on / at once (default 64)
  --max-notification-backlog-bytes <n>
                           bytes waiting toward the provider on / before notifications are
                           dropped (counted) (default 8388608)
  --pair-budget-bytes <n>  bytes a program's database or daemon socket may leave unread in memory;
                           past it the rest waits in a temporary file (default 2097152)
  --max-pair-spill-bytes <n>
                           bytes one such pair may hold on disk for a slow program before that
                           pair alone ends; 0: no spilling, the budget pauses / (default 1073741824)
  --max-spill-bytes <n>    bytes every pair together may hold on disk (default 4294967296)
  --spill-dir <dir>        where the temporary files go (each unlinked at once; default the OS's)
  --pair-stall-ms <n>      without spilling: a pair holding / paused while its program reads
                           nothing for this long ends (default 10000)
  --max-pair-backlog-bytes <n>
                           hard cap: bytes a program's database or daemon socket may leave unread
                           before that pair alone ends (default 67108864)
  --max-tree-watches <n>   directories one tree watches at most (an inotify watch each, ~2-3 KB);
                           past it a directory is sent with changes: false (default: the kernel's
                           limit)
  --max-held-connections <n>
                           program connections held before the begin; more are closed (default 256)
  --allow-host <name>      a Host name the program port accepts besides localhost, 127.0.0.1 and
                           [::1] (repeatable; "*" accepts any); others get 403
  --allow-origin <origin>  an Origin (scheme://host[:port]) the program port accepts besides
                           loopback ones (repeatable; "*" accepts any); others get 403
  --allow-provider-origin <origin>
                           an Origin the provider port accepts besides loopback ones (repeatable;
                           "*" accepts any): a handshake with another Origin (a browser page's) gets
                           403; one with none (every provider client but a browser) is not checked,
                           nor is its Host (the provider names the container as it reaches it)
  --revision <r>           the spec revision to speak (default and only: ${SPOKEN_REVISIONS.join(", ")})
  --fuse-cache <level>     what the kernel caches of FUSE mounts: none (every read and stat asked;
                           no shared mmap), close-to-open (default: 1 s attributes and names,
                           pages revalidated at each open), full (60 s, pages kept across
                           opens)
  --quiet                  print nothing but the listening line and errors
  --log-format <f>         text (default) or json: every stderr line one JSON object (time, level,
                           event, the ids in it, message); info for progress, error for the rest
  --health <host:port>     serve GET /healthz (200 once serving, 503 while starting; what the
                           provider holds) and GET /metrics (Prometheus text) there
  --allow-health-host <name>
                           a Host name (and its Origins) --health accepts besides loopback and the
                           address it is bound to (every local address when 0.0.0.0): a scraper's
                           service name, say (repeatable; "*" accepts any); others get 403
  -h, --help               this text

diverge-proxy bundle --out <dir> writes the proxy for an image (diverge-proxy bundle --help).
Port 0 picks a free port. Stops on SIGINT or SIGTERM.
`;

function port(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^[0-9]+$/.test(text) || value > 65535) throw new Error(`--${name} must be a port number from 0 to 65535, not ${JSON.stringify(text)}`);
  return value;
}

function positive(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^[0-9]+$/.test(text) || value < 1 || !Number.isSafeInteger(value)) throw new Error(`--${name} must be a positive whole number, not ${JSON.stringify(text)}`);
  return value;
}

function whole(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(value)) throw new Error(`--${name} must be a whole number of bytes (0 or more), not ${JSON.stringify(text)}`);
  return value;
}

/** The operating flags (ops.ts), beside the proxy's own options. */
interface OpsFlags {
  readonly logFormat: "text" | "json";
  readonly health?: { host: string; port: number; allowedHosts?: readonly string[] };
}

function parseProxyArgs(argv: string[]): (ProxyOptions & { ops: OpsFlags }) | "help" {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: "string" },
      host: { type: "string" },
      "program-port": { type: "string" },
      "app-port": { type: "string" },
      root: { type: "string" },
      "pg-port": { type: "string" },
      "secrets-gate": { type: "boolean" },
      "no-secrets-gate": { type: "boolean" },
      "max-message-bytes": { type: "string" },
      "max-pending-asks": { type: "string" },
      "max-open-channels": { type: "string" },
      "max-open-scopes": { type: "string" },
      "max-notification-backlog-bytes": { type: "string" },
      "max-pair-backlog-bytes": { type: "string" },
      "pair-budget-bytes": { type: "string" },
      "pair-stall-ms": { type: "string" },
      "max-pair-spill-bytes": { type: "string" },
      "max-spill-bytes": { type: "string" },
      "spill-dir": { type: "string" },
      "max-held-connections": { type: "string" },
      "max-tree-watches": { type: "string" },
      "allow-host": { type: "string", multiple: true },
      "allow-origin": { type: "string", multiple: true },
      "allow-provider-origin": { type: "string", multiple: true },
      revision: { type: "string" },
      "fuse-cache": { type: "string" },
      quiet: { type: "boolean", default: false },
      "log-format": { type: "string", default: "text" },
      health: { type: "string" },
      "allow-health-host": { type: "string", multiple: true },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help";
  const maxMessageBytes = positive("max-message-bytes", values["max-message-bytes"]);
  const cache = values["fuse-cache"];
  if (cache !== undefined && !(FUSE_CACHE_LEVELS as readonly string[]).includes(cache)) throw new Error(`--fuse-cache must be one of ${FUSE_CACHE_LEVELS.join(", ")}, not ${JSON.stringify(cache)}`);
  if (cache !== undefined) setDefaultFuseCache(cache as FuseCacheLevel);
  const logFormat = values["log-format"];
  if (logFormat !== "text" && logFormat !== "json") throw new Error(`--log-format must be text or json, not ${JSON.stringify(logFormat)}`);
  const health = values.health === undefined ? undefined : /^(?:\[([^\]]+)\]|([^:]+)):([0-9]+)$/.exec(values.health);
  if (values.health !== undefined && (!health || Number(health[3]) > 65535)) throw new Error(`--health must be <host>:<port>, not ${JSON.stringify(values.health)}`);
  if (!health && values["allow-health-host"] !== undefined) throw new Error("--allow-health-host widens --health, which is not given");
  return {
    ops: { logFormat, health: health ? { host: health[1] ?? health[2]!, port: Number(health[3]), allowedHosts: values["allow-health-host"] } : undefined },
    revision: values.revision,
    host: values.host ?? "0.0.0.0",
    port: port("port", values.port),
    programPort: port("program-port", values["program-port"]),
    appPort: port("app-port", values["app-port"]),
    root: values.root,
    pgPort: port("pg-port", values["pg-port"]),
    secretsGate: values["no-secrets-gate"] ? false : true,
    maxMessageBytes,
    maxPendingAsks: positive("max-pending-asks", values["max-pending-asks"]),
    maxOpenChannels: positive("max-open-channels", values["max-open-channels"]),
    maxOpenScopes: positive("max-open-scopes", values["max-open-scopes"]),
    maxNotificationBacklogBytes: positive("max-notification-backlog-bytes", values["max-notification-backlog-bytes"]),
    maxPairBacklogBytes: positive("max-pair-backlog-bytes", values["max-pair-backlog-bytes"]),
    pairBudgetBytes: positive("pair-budget-bytes", values["pair-budget-bytes"]),
    pairStallMs: positive("pair-stall-ms", values["pair-stall-ms"]),
    maxPairSpillBytes: whole("max-pair-spill-bytes", values["max-pair-spill-bytes"]),
    maxSpillBytes: whole("max-spill-bytes", values["max-spill-bytes"]),
    spillDir: values["spill-dir"],
    maxHeldConnections: positive("max-held-connections", values["max-held-connections"]),
    maxTreeWatches: positive("max-tree-watches", values["max-tree-watches"]),
    allowedHosts: values["allow-host"],
    allowedOrigins: values["allow-origin"],
    allowedProviderOrigins: values["allow-provider-origin"],
    log: values.quiet ? undefined : (line: string) => process.stderr.write(`${line}\n`),
  };
}

const bundleHelp = `Usage: diverge-proxy bundle --out <dir> [--no-sea] [--sea] [--no-natives]

Writes the proxy for an image into <dir>: diverge-proxy.mjs (run with node 20.19+),
diverge-proxy.cjs, node_modules/ with the native packages (the FUSE binding, ws's optional
helpers) as installed here, and the single executable diverge-proxy (this
node with the proxy inside; made when postject is installed: npm i -D postject@1.0.0-alpha.6).
Each form finds node_modules/ beside its own file: copy the directory whole.

  --no-sea      make no single executable
  --sea         fail when the single executable cannot be made
  --no-natives  copy no node_modules/ (a mount then answers why it cannot serve)
`;

/** \`diverge-proxy bundle\`: the bundles this package ships, their native parts and the executable (image.ts). */
async function bundleCommand(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { out: { type: "string" }, sea: { type: "boolean" }, "no-sea": { type: "boolean" }, "no-natives": { type: "boolean" }, help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: false,
    }));
    if (!values.help && values.out === undefined) throw new Error("--out <dir> is required");
  } catch (problem) {
    process.stderr.write(`${(problem as Error).message}\n\n${bundleHelp}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(bundleHelp);
    return 0;
  }
  const { writeImage } = await import("./image.js");
  return writeImage({ out: values.out!, sea: values["no-sea"] ? false : values.sea ? true : undefined, natives: !values["no-natives"] });
}

async function main(argv: string[]): Promise<number> {
  if (argv[0] === "bundle") return bundleCommand(argv.slice(1));
  let options: (ProxyOptions & { ops: OpsFlags }) | "help";
  try {
    options = parseProxyArgs(argv);
    if (options !== "help" && options.revision !== undefined) (await import("@diverge/multiplexer")).speakRevision(options.revision);
  } catch (problem) {
    process.stderr.write(`${(problem as Error).message}\n\n${helpText(await spoken())}`);
    return 2;
  }
  if (options === "help") {
    process.stdout.write(helpText(await spoken()));
    return 0;
  }
  const { ops, ...proxyOptions } = options;
  const startedAt = Date.now();
  // Text or JSON (every stderr line one JSON object from here on, errors too; progress lines at level
  // info): outside text only in fields, one event a line, and every form of every secret the provider
  // has fed redacted (the proxy never logs one on purpose; a program's error quoting one is redacted).
  const fedSecrets: string[] = [];
  const startLog = async () => {
    const { useLogFormat, logEvent } = await import("@diverge/multiplexer/log");
    const log = useLogFormat({ format: ops.logFormat, secrets: () => fedSecrets });
    if (proxyOptions.log) proxyOptions.log = (line, event) => log.info(line, event);
    proxyOptions.onSecretsFed = (values) => fedSecrets.push(...values.filter((value) => !fedSecrets.includes(value)));
    // `notice`: a line said even with --quiet (where the health endpoint is: with port 0 the only way to learn it).
    return { notice: (line: string) => log.info(line), logEvent };
  };
  // JSON from the first line on (a failing bind's error too); the text log once listening (startup.test.ts).
  const early = ops.logFormat === "json" ? await startLog() : undefined;
  const ports = await bindPorts(proxyOptions);
  // Listening for the stop signals before saying "listening": whoever reads that line may stop us at once.
  const stopped = new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  process.stdout.write(
    `diverge-proxy listening: provider ws://${options.host}:${ports.provider.port} (/, /requests), program http://127.0.0.1:${ports.program.port}/mcp` +
      `${options.secretsGate === false ? "" : " (MCP held until the program takes its secrets)"}\n`,
  );
  const { notice, logEvent } = early ?? (await startLog());
  let proxy: import("./proxy.js").RunningProxy | undefined;
  // /healthz answers from here on: 503 while the proxy loads, 200 once it serves.
  let opsServer: { url: string; close(): Promise<void> } | undefined;
  if (ops.health) {
    const [{ serveOps }, { proxyHealth, proxyMetrics }] = await Promise.all([import("@diverge/multiplexer/ops"), import("./ops.js")]);
    try {
      opsServer = await serveOps({ ...ops.health, health: () => proxyHealth(proxy, startedAt), metrics: proxyMetrics(() => proxy) });
    } catch (problem) {
      await ports.close();
      throw new Error(`--health ${ops.health.host}:${ops.health.port}: ${(problem as Error).message}`);
    }
    notice(`diverge-proxy health and metrics at ${opsServer.url}/healthz and /metrics`);
  }
  try {
    const { startProxy } = await import("./proxy.js");
    proxy = await startProxy(proxyOptions, ports);
  } catch (problem) {
    await ports.close();
    await opsServer?.close();
    throw problem;
  }
  const { log: _log, spillPool: _pool, onSecretsFed: _fed, ...shown } = proxy.options;
  proxyOptions.log?.(...logEvent("diverge-proxy options {options}", { options: shown }));
  // The whole machine is the root unless told otherwise: a provider's tree, reads and writes reach
  // every file the proxy can. Right for a container that is the program's own, worth a word anywhere else.
  if ((proxyOptions.root ?? "/").replace(/\/+$/, "") === "") {
    proxyOptions.log?.("diverge-proxy: warning: --root is / (the default): the provider's filesystem asks reach every file this process can; give the container's root, e.g. --root /workspace, unless the container is the program's own");
  }
  await stopped;
  // The temporaries of writes still in flight are removed first, by their held directory and name
  // (write.ts), and again on every way out below: a stopped proxy leaves none under the root.
  const { removeTemporaries, settleTemporaries } = await import("./families/filesystem/index.js");
  removeTemporaries();
  process.once("exit", () => removeTemporaries());
  // Closing aborts every call still waiting on the program (/register, /secrets, the inward MCP
  // session) and ends every socket; should anything still hang, the proxy exits regardless after
  // SHUTDOWN_GRACE_MS. A second signal exits at once.
  const again = () => process.exit(1);
  process.once("SIGINT", again);
  process.once("SIGTERM", again);
  const grace = new Promise<"late">((resolve) => setTimeout(() => resolve("late"), SHUTDOWN_GRACE_MS).unref());
  void opsServer?.close();
  if ((await Promise.race([proxy.close(), grace])) === "late") proxyOptions.log?.(`diverge-proxy: closing took longer than ${SHUTDOWN_GRACE_MS} ms; exiting anyway`);
  await settleTemporaries();
  return 0;
}

/** The longest the proxy waits for its parts to close after SIGINT or SIGTERM before exiting. */
const SHUTDOWN_GRACE_MS = 800;

main(process.argv.slice(2)).then(
  (code) => {
    // Exits explicitly: a keep-alive socket or timer of a dependency must not keep a stopped proxy alive.
    process.exit(code);
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
