// `diverge connect`: hold a container's proxy for as long as the command runs and answer everything
// it asks, on the transport chosen; optionally serve the container's tools as an MCP server.
import { mkdirSync } from "node:fs";
import { parseArgs } from "node:util";
import { connectProxy, type PathsConnection, type ProxyHandlers } from "../paths/connect.js";
import { PathsTools, pathsGateWarning } from "../families/mcp-inward/paths.js";
import { postgresOverPaths } from "../families/postgres/paths.js";
import { mcpProviderHandlers } from "../families/mcp-outward/handlers.js";
import type { ProviderHandlers } from "../gen/exchanges.js";
import type { AnswerContext } from "../exchanges/engine.js";
import { relayToMcp, type McpRelay, type McpTarget } from "../families/mcp-outward/relay.js";
import { commandExec } from "../families/command/exec.js";
import { PostgresVault } from "../families/vault/store.js";
import { openContainer, type MultiplexedConnection } from "../multiplexed/container.js";
import { pipePostgres } from "../families/postgres/multiplexed.js";
import { databaseAddress, type DatabaseAddress } from "../families/postgres/address.js";
import { parseHostPort, serveToolsHttp, serveToolsStdio, type RelayedMethod, type ServingTools, type SourceCallOptions, type ToolsSource } from "../families/mcp-inward/serve-tools.js";
import { BackendError, Exit, exitStatusHelp, fail } from "./exit.js";
import { sayPathsEvents } from "./paths-events.js";
import { connectFsHelp, connectFsOptions, connectFsUsage, filesystemExit, holdFilesystem, parseMountSpecs, takeWatchTreeRoot, type FilesystemTarget, type HeldFilesystem } from "./connect-fs.js";
import { FilesystemError } from "../families/filesystem/errors.js";
import { PathsMounts } from "../families/fuse/paths.js";
import { beginPathsAgent } from "../families/agents/paths.js";
import type { Agent } from "../families/agents/agent.js";
import { logEvent, type LogFields, type Say } from "@diverge/multiplexer/log";
import { ConnectOps, connectOpsHelp, connectOpsOptions, connectOpsUsage } from "./connect-ops.js";
import { agentConnectHelp, agentConnectOptions, agentConnectUsage, agentFlagsProblem, holdAgent, wantsAgent } from "./agent-connect.js";

export const connectUsage = "  connect    hold a container's proxy and answer everything it asks (multiplexed or paths); serve its tools over MCP";

const help = `Usage:
  diverge connect --proxy ws://HOST:14979 [--transport multiplexed|paths]   (default multiplexed)
    [--arguments <json>] [--image <name@digest>] [--secret-env NAME]...      (begin, multiplexed)
    [--mcp <url> | -- <command> [args...]]        the provider's MCP server the program may use
    [--database-url <url>]                         the container's database (else embedded PGlite)
    [--vault-database-url <url>] [--vault-dir <dir>] [--container-id <id>] [--command-exec <path>]
    [--serve-tools <host:port> [--serve-tools-max-sessions <n>] [--serve-tools-idle-seconds <s>]
      [--allow-host <name>]... [--allow-origin <origin>]...] [--serve-tools-stdio]
${agentConnectUsage}
${connectFsUsage}
${connectOpsUsage}

Holds the container's proxy for as long as it runs and answers everything the proxy asks:
  multiplexed  opens the proxy's one connection on /, begins the container (--arguments, --image),
               feeds the secrets its DIVERGE.md declares (--secret-env), and serves the database
               connections the proxy announces; /requests is held beside it for what the proxy asks
               before the begin and for commands (which have no begin-scope channel).
  paths        holds /requests only (dialled again with backoff when it ends); the container's
               tools are reached on /tool/*.
The proxy takes one multiplexed connection in its life: when it is lost this command ends with
exit status 3 (restart the proxy to connect again). /requests is dialled again with backoff.
Every exchange prints one line on stderr unless --quiet; SIGINT or SIGTERM stops it (exit 0).
\`diverge answer\` is the narrow form of this command (paths transport; MCP, command and vault only).

Flags:
  --proxy <url>             the proxy's provider-facing address (default ws://127.0.0.1:14979)
  --transport <t>           multiplexed (default) or paths
  --arguments <json>        the begin's arguments (default null)
  --image <name@digest>     the begin's image
  --secret-env <NAME>       a secret whose value is the environment variable of that name (repeatable)
  --mcp <url>               the provider's MCP server (Streamable HTTP) the program's MCP exchanges go to
  -- <command> [args...]    the same, a command speaking MCP on stdio, after \`--\`, its argv as given
                            (as \`diverge answer\` takes it; the older --mcp-stdio "<command>", split
                            on spaces, is still read)
  --database-url <url>      the container's database connections go to this PostgreSQL (else an
                            embedded PGlite, started on the first connection)
  --vault-database-url <url>
                            keep the vault in this PostgreSQL
  --vault-dir <dir>         keep the vault in an embedded PGlite database here (default in memory:
                            it lasts this run and leaves nothing behind)
  --vault-namespace <name>  which store the keys live in (default "default")
  --container-id <id>       who holds the vault's locks: the container's own id, so a restarted
                            provider holds (refreshes, unlocks) what it held; default a random id of
                            this run, whose locks are nobody's once it ends, until their time runs out
  --command-exec <path>     run each command with this executable
  --serve-tools <host:port> serve the container's tools and resources as an MCP server (Streamable
                            HTTP at http://host:port/mcp, any number of sessions up to the cap)
  --serve-tools-max-sessions <n>
                            sessions held at once (default 100): a new one takes the place of the
                            oldest quiet session, or is refused with HTTP 503 when every one is busy
  --serve-tools-idle-seconds <s>
                            a session with no request in flight and no notification stream open is
                            closed after this long (default 300)
  --allow-host <name>       a Host name --serve-tools (or --serve-agent) accepts besides localhost,
                            127.0.0.1 and [::1] (repeatable; "*" accepts any); others get 403
  --allow-origin <origin>   an Origin (scheme://host[:port]) --serve-tools (or --serve-agent) accepts
                            besides loopback ones (repeatable; "*" accepts any); others get 403
  --serve-tools-stdio       the same on stdin/stdout (one session; logs stay on stderr)
${agentConnectHelp}
${connectFsHelp}
${connectOpsHelp}
  --max-message-bytes <n>   the proxy's message limit (its --max-message-bytes; default 16 MiB): an
                            answer larger than it is not sent (not served), as the proxy would refuse it
  --timeout <ms>            give up on the begin, DIVERGE.md or secrets after this long (default 60000)
  --revision <r>            the spec revision to speak (default the newest spoken)
  --quiet                   print nothing but errors
  -h, --help                this text

${exitStatusHelp}`;

export async function runConnect(args: string[]): Promise<number> {
  // A stdio MCP server comes after `--`, with its real argv (as `diverge answer` takes it).
  const split = args.indexOf("--");
  const stdioCommand = split < 0 ? [] : args.slice(split + 1);
  if (split >= 0) args = args.slice(0, split);
  const watchTree = takeWatchTreeRoot(args);
  args = watchTree.args;
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: {
        proxy: { type: "string", default: "ws://127.0.0.1:14979" },
        transport: { type: "string", default: "multiplexed" },
        revision: { type: "string" },
        arguments: { type: "string" },
        image: { type: "string" },
        "secret-env": { type: "string", multiple: true },
        mcp: { type: "string" },
        "mcp-stdio": { type: "string" },
        "database-url": { type: "string" },
        "vault-database-url": { type: "string" },
        "vault-dir": { type: "string" },
        "vault-namespace": { type: "string", default: "default" },
        "container-id": { type: "string" },
        "command-exec": { type: "string" },
        "serve-tools": { type: "string" },
        "serve-tools-stdio": { type: "boolean", default: false },
        ...connectFsOptions,
        ...connectOpsOptions,
        ...agentConnectOptions,
        "serve-tools-max-sessions": { type: "string" },
        "serve-tools-idle-seconds": { type: "string" },
        "allow-host": { type: "string", multiple: true },
        "allow-origin": { type: "string", multiple: true },
        timeout: { type: "string" },
        "max-message-bytes": { type: "string" },
        quiet: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (problem) {
    process.stderr.write(`${(problem as Error).message}\n\n${help}`);
    return Exit.Usage;
  }
  const { values } = parsed;
  if (values.help) {
    process.stdout.write(help);
    return Exit.Ok;
  }
  const usage = (message: string) => {
    process.stderr.write(`${message}\n\nRun \`diverge connect --help\` for the flags.\n`);
    return Exit.Usage;
  };
  const transport = values.transport;
  if (transport !== "multiplexed" && transport !== "paths") return usage(`--transport must be multiplexed or paths, not ${transport}`);
  const multiplexed = transport === "multiplexed";
  // An agent container (--agent, --serve-agent): agents::begin on /, /agent/register (with --arguments) on paths.
  const agentMode = wantsAgent(values);
  const agentProblem = agentFlagsProblem(values);
  if (agentProblem) return usage(agentProblem);
  if (!multiplexed && ((values.arguments !== undefined && !agentMode) || values.image !== undefined || (values["secret-env"]?.length ?? 0) > 0)) {
    return usage("--arguments, --image and --secret-env begin the container, which only the multiplexed transport does");
  }
  let beginArguments: unknown = null;
  if (values.arguments !== undefined) {
    try {
      beginArguments = JSON.parse(values.arguments);
    } catch {
      return usage("--arguments is not JSON");
    }
  }
  let image: { name: string; digest: string } | undefined;
  if (values.image !== undefined) {
    const at = values.image.lastIndexOf("@");
    if (at <= 0) return usage("--image must be <name>@<digest>");
    image = { name: values.image.slice(0, at), digest: values.image.slice(at + 1) };
  }
  const secrets: Record<string, string> = {};
  for (const name of values["secret-env"] ?? []) {
    const value = process.env[name];
    if (value === undefined) return usage(`--secret-env ${name}: no such environment variable`);
    secrets[name] = value;
  }
  if ([values.mcp !== undefined, values["mcp-stdio"] !== undefined, split >= 0].filter(Boolean).length > 1) return usage("give at most one MCP server: --mcp <url> or -- <command> [args...]");
  if (split >= 0 && stdioCommand.length === 0) return usage("-- needs the command of an MCP server on stdio");
  const timeoutMs = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutMs !== undefined && !(timeoutMs >= 0)) return usage("--timeout must be a number of milliseconds");
  const maxMessageBytes = values["max-message-bytes"] === undefined ? undefined : Number(values["max-message-bytes"]);
  if (maxMessageBytes !== undefined && !(Number.isInteger(maxMessageBytes) && maxMessageBytes > 0)) return usage("--max-message-bytes must be a positive number of bytes");
  const serveAt = values["serve-tools"] === undefined ? undefined : parseHostPort(values["serve-tools"]);
  if (values["serve-tools"] !== undefined && !serveAt) return usage("--serve-tools must be <host>:<port>, e.g. 127.0.0.1:7000");
  if (serveAt && values["serve-tools-stdio"]) return usage("give at most one of --serve-tools and --serve-tools-stdio");
  // The container's filesystem (connect-fs.ts): --mount, --watch-tree, --ignore.
  const mountSpecs = parseMountSpecs(values.mount);
  if (typeof mountSpecs === "string") return usage(mountSpecs);
  if ((values.ignore?.length ?? 0) > 0 && !values["watch-tree"]) return usage("--ignore belongs to --watch-tree");
  if (values["watch-tree"] && values["serve-tools-stdio"]) return usage("--watch-tree prints on stdout, which --serve-tools-stdio takes");
  const maxSessions = values["serve-tools-max-sessions"] === undefined ? undefined : Number(values["serve-tools-max-sessions"]);
  if (maxSessions !== undefined && !(Number.isInteger(maxSessions) && maxSessions > 0)) return usage("--serve-tools-max-sessions must be a whole number above 0");
  const idleSeconds = values["serve-tools-idle-seconds"] === undefined ? undefined : Number(values["serve-tools-idle-seconds"]);
  if (idleSeconds !== undefined && !(idleSeconds > 0)) return usage("--serve-tools-idle-seconds must be a number of seconds above 0");
  if (!serveAt && (maxSessions !== undefined || idleSeconds !== undefined)) return usage("--serve-tools-max-sessions and --serve-tools-idle-seconds bound the sessions of --serve-tools, which is not given");
  if (!serveAt && values["serve-agent"] === undefined && (values["allow-host"] !== undefined || values["allow-origin"] !== undefined)) return usage("--allow-host and --allow-origin widen --serve-tools or --serve-agent: give one of them too");

  // --log-format and --health (connect-ops.ts): the progress lines go through its log.
  const ops = ConnectOps.parse(values, transport);
  if (typeof ops === "string") return usage(ops);
  const say = await ops.start(values.quiet!, Object.values(secrets));
  const cleanups: (() => Promise<unknown>)[] = [() => ops.close()];
  try {
    await ops.serve();
  } catch (problem) {
    return fail(new BackendError("--health", (problem as Error).message));
  }
  const cleanUp = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  };
  let stopping = false;

  // The backends: the provider's MCP server, the vault, commands, the container's database.
  let target: McpTarget | undefined;
  if (values.mcp !== undefined) target = { url: values.mcp };
  else if (stdioCommand.length > 0) target = { command: stdioCommand[0]!, args: stdioCommand.slice(1) };
  else if (values["mcp-stdio"] !== undefined) {
    const [command, ...rest] = values["mcp-stdio"].split(/\s+/).filter(Boolean);
    if (!command) return usage("--mcp-stdio needs a command");
    target = { command, args: rest };
  }
  const relay: McpRelay | undefined = target && relayToMcp(target, { onError: (error) => ops.error(...logEvent("mcp server: {error}", { error: error.message })) });
  if (relay) cleanups.push(() => relay.close());
  // Said once the proxy is held: a command refused at the dial says one sentence and nothing else.
  const backendLines: [string, LogFields?][] = [];
  // The vault's lock holder is the container: --container-id, else a random id of this run (never the --proxy URL).
  const vaultOptions = { namespace: values["vault-namespace"]!, holder: values["container-id"] };
  let vault: PostgresVault;
  try {
    if (values["vault-database-url"]) {
      vault = await PostgresVault.connect(values["vault-database-url"], vaultOptions);
      backendLines.push(["vault in PostgreSQL (namespace {namespace})", { namespace: vaultOptions.namespace }]);
    } else {
      // Without --vault-dir, in memory: nothing is left behind (the vault lasts this run).
      const dir = values["vault-dir"];
      if (dir !== undefined) mkdirSync(dir, { recursive: true });
      vault = PostgresVault.embedded(dir, vaultOptions);
      backendLines.push(dir === undefined ? ["vault in memory, for this run (embedded PGlite, namespace {namespace})", { namespace: vaultOptions.namespace }] : ["vault in {dir} (embedded PGlite, namespace {namespace})", { dir, namespace: vaultOptions.namespace }]);
    }
  } catch (problem) {
    await cleanUp();
    return fail(new BackendError("the vault", (problem as Error).message));
  }
  cleanups.push(() => vault.close());
  const executable = values["command-exec"];
  if (executable) backendLines.push(["commands run {executable}", { executable }]);
  const handlers: ProxyHandlers = Object.assign(Object.create(relay ?? null) as ProxyHandlers, vault.handlers(), executable ? { command: commandExec(executable) } : {});
  const database = databaseBackend(values["database-url"], say);
  cleanups.push(() => database.close());
  // The program's database connections on /requests (kind 11), made while nobody has begun on /.
  (handlers as { raw?: ProxyHandlers["raw"] }).raw = postgresOverPaths(() => database.address(), { onError: (error) => ops.error(...logEvent("database: {error}", { error: error.message })) });

  let lost: (() => void) | undefined;
  const lostConnection = new Promise<void>((resolve) => (lost = resolve));
  const signalled = new Promise<void>((resolve) => {
    const stop = () => {
      // Stopped within a second whatever holds the process (a command's children, a backend's close):
      // what cleanUp has not finished by then is cut short; a command's group is SIGKILLed on exit.
      setTimeout(() => process.exit(Exit.Ok), STOP_DEADLINE_MS).unref();
      resolve();
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });

  // Paths mounts are answered on /requests (kinds 12–18): their handlers join the others.
  const pathsMounts = !multiplexed && mountSpecs.length > 0 ? new PathsMounts(values.proxy!) : undefined;
  if (pathsMounts) Object.assign(handlers, pathsMounts.handlers());

  // /requests, on both transports: asks before the begin, and commands. On multiplexed it is held
  // only once / is open, so a command refused at the dial (the one connection used) takes no ask.
  let paths: PathsConnection | undefined;
  const holdRequests = (): PathsConnection => {
    for (const [message, fields] of backendLines.splice(0)) say(...logEvent(message, fields ?? {}));
    const held: PathsConnection = connectProxy(values.proxy!, handlers, {
      revision: values.revision,
      maxMessageBytes,
      onEvent: ops.pathsEvents(sayPathsEvents(values.proxy!, say, () => stopping, (line, event) => ops.error(line, event))),
    });
    cleanups.push(() => held.close());
    paths = held;
    return held;
  };
  if (!multiplexed) holdRequests();

  let source: ToolsSource | undefined;
  let agent: Agent | undefined;
  let filesystemTarget: FilesystemTarget;
  if (multiplexed) {
    let connection: MultiplexedConnection;
    try {
      connection = await openContainer(values.proxy!, {
        revision: values.revision,
        timeoutMs,
        maxMessageBytes,
        onPostgres: (announced) => database.pipe(announced),
        // What the proxy asks on the begin scope once begun (outward MCP, vault): the same handlers as /requests.
        handlers: announcing(ops.counting({ ...mcpProviderHandlers(relay ?? {}, { onError: (error) => ops.error(...logEvent("mcp server: {error}", { error: error.message })) }), ...vault.handlers() }), say),
        onEvent: (event) => {
          switch (event.type) {
            case "announced":
              return say(`/ ${event.kind} connection ${event.id}: announced`);
            case "declined":
              return say(...logEvent(`/ ${event.kind} connection ${event.id}: declined ({reason})`, { reason: event.reason }));
            case "pairFailed":
              return ops.error(...logEvent(`/ ${event.kind} connection ${event.id}: {error}`, { error: event.error.message }));
            case "answerNotSent":
              return ops.error(...logEvent(`/ channel ${event.channel}: not answered: {reason}`, { reason: event.reason }));
            case "heldForSecrets":
              return say(...logEvent("{what}: held by the proxy's secrets gate until the secrets are fed", { what: event.what }));
            case "ended":
              ops.multiplexed = "ended";
              if (!stopping) lost?.();
              return;
          }
        },
      });
    } catch (problem) {
      await cleanUp();
      return fail(problem);
    }
    cleanups.push(() => connection.close());
    if (ops.multiplexed === "none") ops.multiplexed = "open";
    holdRequests();
    try {
      const begin = image ? { arguments: beginArguments, image } : { arguments: beginArguments };
      if (agentMode) agent = await connection.beginAgent(begin, { timeoutMs });
      const tools = agent ? agent.tools : await connection.beginTools(begin, { timeoutMs });
      ops.begun = true;
      say(...logEvent(`/ begun: ${tools.length} tool${tools.length === 1 ? "" : "s"} declared${tools.length > 0 ? " {tools}" : ""}`, tools.length > 0 ? { tools: tools.map((tool) => tool.name) } : undefined));
      const info = await (agent ?? connection).info({ timeoutMs });
      const declared = info?.frontMatter.secrets ?? [];
      const missing = declared.filter((name) => !(name in secrets));
      if (missing.length > 0) {
        ops.error(...logEvent(`the container's DIVERGE.md declares the secret${missing.length > 1 ? "s" : ""} {missing}, not given: add {flags}; a proxy with the secrets gate (the default) holds every MCP exchange until the program has its secrets`, {
          missing: missing.join(", "),
          flags: missing.map((name) => `--secret-env ${name}`).join(" "),
        }));
      } else if (declared.length > 0 || Object.keys(secrets).length > 0) {
        await (agent ?? connection).feedSecrets(secrets, { timeoutMs });
        say(`/ secrets fed (${Object.keys(secrets).length})`);
      }
    } catch (problem) {
      await cleanUp();
      return fail(problem);
    }
    source = agent ? undefined : loggedSource(connection.mcp, say);
    filesystemTarget = { transport: "multiplexed", connection };
  } else {
    source = agentMode ? undefined : loggedSource(new PathsTools(values.proxy!), say);
    if (agentMode) {
      try {
        const registered = await beginPathsAgent(values.proxy!, { arguments: beginArguments }, { maxMessageBytes });
        cleanups.push(() => registered.close());
        agent = registered;
        say("/agent/register: registered");
      } catch (problem) {
        await cleanUp();
        return fail(problem);
      }
    }
    if (pathsMounts) {
      // The proxy asks a mount's operations on /requests: held before the first mount.
      try {
        await paths!.whenConnected({ timeoutMs });
      } catch (problem) {
        await cleanUp();
        return fail(problem);
      }
    }
    filesystemTarget = { transport: "paths", proxy: values.proxy!, mounts: pathsMounts ?? new PathsMounts(values.proxy!) };
  }
  let filesystem: HeldFilesystem;
  try {
    filesystem = await holdFilesystem(filesystemTarget, { mounts: mountSpecs, watchTree: values["watch-tree"]!, root: watchTree.root, ignore: values.ignore ?? [], say, error: (line, event) => ops.error(line, event) });
  } catch (problem) {
    await cleanUp();
    if (problem instanceof FilesystemError) {
      ops.error(...logEvent("{error}", { error: problem.message }));
      return filesystemExit(problem);
    }
    return fail(problem);
  }
  cleanups.push(() => filesystem.close());

  let serving: ServingTools | undefined;
  if (source && (serveAt || values["serve-tools-stdio"])) {
    try {
      if (serveAt) {
        serving = await serveToolsHttp(source, { host: serveAt.host, port: serveAt.port, log: say, maxSessions, sessionIdleMs: idleSeconds === undefined ? undefined : idleSeconds * 1000, guard: { hosts: values["allow-host"] ?? [], origins: values["allow-origin"] ?? [] } });
        // Said even with --quiet: with port 0 it is the only way to learn where.
        ops.info(`serving the container's tools at ${serving.url}`);
      } else {
        serving = await serveToolsStdio(source, { log: say });
        say("serving the container's tools on stdin/stdout");
      }
    } catch (problem) {
      await cleanUp();
      return fail(new BackendError("--serve-tools", (problem as Error).message));
    }
    const served = serving;
    cleanups.push(() => served.close());
    // The paths transport cannot feed secrets: a gated proxy refuses every agent request; said at start.
    if (!multiplexed) void pathsGateWarning(new PathsTools(values.proxy!)).then((line) => line && ops.error(...logEvent("{warning}", { warning: line })));
  }

  // --serve-tools-stdio: the agent closing stdin ends the run (exit code 0), as it ends any stdio MCP server.
  const agentGone = serving?.ended?.then(() => "agentGone" as const) ?? new Promise<never>(() => {});
  if (agent) {
    const held = await holdAgent(agent, values, say, (line, event) => ops.error(line, event));
    if (typeof held === "number") {
      await cleanUp();
      return held;
    }
    cleanups.push(() => held.close());
  }

  const outcome = await Promise.race([signalled.then(() => "signal" as const), lostConnection.then(() => "lost" as const), agentGone, filesystem.ended]);
  stopping = true;
  if (typeof outcome === "number") {
    await cleanUp();
    return outcome;
  }
  if (outcome === "lost") {
    ops.error(...logEvent("the proxy's one multiplexed connection ({proxy}) was lost; a proxy takes one in its life, so restart the proxy (its container) and run diverge connect again", { proxy: values.proxy }));
  } else say("stopping");
  await cleanUp();
  return outcome === "lost" ? Exit.Lost : Exit.Ok;
}

/** How long a stop signal leaves the cleanup before the process exits regardless. */
const STOP_DEADLINE_MS = 900;

/** Where the container's database connections go: --database-url, else an embedded PGlite started on the first one. */
function databaseBackend(url: string | undefined, say: Say) {
  let embedded: Promise<{ address: DatabaseAddress; close(): Promise<void> }> | undefined;
  const start = async () => {
    const { PGlite } = await import("@electric-sql/pglite");
    const { PGLiteSocketServer } = await import("@electric-sql/pglite-socket");
    const db = await PGlite.create();
    const server = new PGLiteSocketServer({ db, port: 0, host: "127.0.0.1" });
    await server.start();
    const port = Number(server.getServerConn().split(":").pop());
    say(`database: embedded PGlite on 127.0.0.1:${port}`);
    return {
      address: { host: "127.0.0.1", port },
      async close() {
        await server.stop();
        await db.close();
      },
    };
  };
  return {
    async pipe(announced: Parameters<typeof pipePostgres>[0]) {
      return pipePostgres(announced, await this.address());
    },
    /** Where to dial: --database-url, else the embedded PGlite (started now if it is not yet). */
    async address(): Promise<string | DatabaseAddress> {
      // The flag's URL for where to dial; a line (not a process warning) says what of it goes unused.
      if (url) return databaseAddress(url, (text) => say(...logEvent("{warning}", { warning: text })));
      embedded ??= start();
      return (await embedded).address;
    },
    async close() {
      if (embedded) await (await embedded).close();
    },
  };
}

/** `handlers`, each saying one line when the proxy asks its exchange on the begin scope. */
function announcing(handlers: ProviderHandlers, say: Say): ProviderHandlers {
  const wrapped: Record<string, unknown> = {};
  for (const [name, handler] of Object.entries(handlers)) {
    if (typeof handler !== "function") continue;
    wrapped[name] = (ask: unknown, context: AnswerContext) => {
      say(...logEvent(`{path}: ${name}`, { path: context.path }));
      return (handler as (ask: unknown, context: AnswerContext) => unknown)(ask, context);
    };
  }
  return wrapped as ProviderHandlers;
}

/** The container's MCP server as the transport reaches it, with one line per exchange (naming the tool or resource asked: a field). */
function loggedSource(source: ToolsSource, say: Say): ToolsSource {
  const logged =
    <P, R>(what: string, call: (params: P, options?: SourceCallOptions) => Promise<R>, named?: (params: P) => LogFields) =>
    async (params: P, options?: SourceCallOptions) => {
      const fields = named?.(params) ?? {};
      try {
        const result = await call(params, options);
        say(...logEvent(`${what}: answered`, fields));
        return result;
      } catch (problem) {
        say(...logEvent(`${what}: {error}`, { ...fields, error: problem instanceof Error ? problem.message : String(problem) }));
        throw problem;
      }
    };
  return {
    listTools: logged("tools/list", (params, options) => source.listTools(params, options)),
    listResources: logged("resources/list", (params, options) => source.listResources(params, options)),
    callTool: logged("tools/call", (params, options) => source.callTool(params, options), (params) => ({ tool: (params as { name?: unknown }).name })),
    readResource: logged("resources/read", (params, options) => source.readResource(params, options), (params) => ({ uri: (params as { uri?: unknown }).uri })),
    notifications: () => source.notifications(),
    ...(source.relay && {
      relay: (method: RelayedMethod, params: Record<string, unknown> | undefined, options?: SourceCallOptions) =>
        logged(method, (relayed: typeof params, relayOptions?: SourceCallOptions) => source.relay!(method, relayed, relayOptions), relayedFields(method))(params, options),
    }),
  };
}

/** What a relayed request's log line names: the tool, or the resource. */
function relayedFields(method: RelayedMethod): ((params: Record<string, unknown> | undefined) => LogFields) | undefined {
  if (method === "tools/call") return (params) => ({ tool: params?.name });
  if (method === "resources/read") return (params) => ({ uri: params?.uri });
  return undefined;
}
