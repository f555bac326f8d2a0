// `diverge tools …`: one exchange with a tool container through its proxy's multiplexed connection.
// The proxy takes one connection in its life, so each run begins the container, optionally feeds its
// secrets, makes its one exchange and prints the result as JSON.
import { escapeControls } from "@diverge/multiplexer/log";
import { parseArgs } from "node:util";
import { ContainerError, openContainer, type MultiplexedConnection } from "../multiplexed/container.js";
import { Exit, exitStatusHelp, fail } from "./exit.js";

export const toolsUsage = "  tools      begin a tool container through its proxy (/) and list, call or read its tools";

const help = `Usage:
  diverge tools list             [flags]            tools/list of the container's MCP server
  diverge tools resources        [flags]            resources/list
  diverge tools call <name> [<arguments JSON>] [flags]   tools/call
  diverge tools read <uri>       [flags]            resources/read
  diverge tools notifications    [flags]            print notifications until interrupted (or --count)
  diverge tools info             [flags]            the container's DIVERGE.md, parsed

Each run opens the proxy's one multiplexed connection, begins the container with --arguments, reads
its DIVERGE.md, feeds the secrets (a secret the front matter declares and no flag gives is named on
stderr before the run waits), makes its exchange and prints the result as JSON.
These commands are one-shot: a proxy takes one connection on / in its life, so a second run against
the same proxy is refused (exit status 4). To use a container's tools more than once, hold the
connection with \`diverge connect\` (and its --serve-tools).

Flags:
  --proxy <url>           the proxy's provider-facing address (default ws://127.0.0.1:14979)
  --arguments <json>      the begin's arguments (default null)
  --image <name@digest>   the begin's image, e.g. library/nginx@sha256:…
  --secret <NAME=VALUE>   a secret's value (repeatable); prefer --secret-env, which keeps it out of ps
  --secret-env <NAME>     a secret whose value is the environment variable of that name (repeatable)
  --cursor <cursor>       the page to list from (list, resources)
  --count <n>             notifications: stop after n
  --database-url <url>    serve the container's database connections from this PostgreSQL server
  --timeout <ms>          give up on any one wait after this long (default 60000; 0: never)
  --revision <r>          the spec revision to speak (default the newest spoken)
  -h, --help              this text

${exitStatusHelp}`;

type Exchange = (connection: MultiplexedConnection) => Promise<unknown>;

export async function runTools(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: {
        proxy: { type: "string", default: "ws://127.0.0.1:14979" },
        revision: { type: "string" },
        arguments: { type: "string" },
        image: { type: "string" },
        secret: { type: "string", multiple: true },
        "secret-env": { type: "string", multiple: true },
        cursor: { type: "string" },
        count: { type: "string" },
        "database-url": { type: "string" },
        timeout: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: true,
    });
  } catch (problem) {
    process.stderr.write(`${(problem as Error).message}\n\n${help}`);
    return Exit.Usage;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(help);
    return 0;
  }
  const usage = (message: string) => {
    process.stderr.write(`${message}\n\n${help}`);
    return Exit.Usage;
  };
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
  for (const pair of values.secret ?? []) {
    const eq = pair.indexOf("=");
    if (eq <= 0) return usage("--secret must be NAME=VALUE");
    secrets[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  for (const name of values["secret-env"] ?? []) {
    const value = process.env[name];
    if (value === undefined) return usage(`--secret-env ${name}: no such environment variable`);
    secrets[name] = value;
  }
  const timeoutMs = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutMs !== undefined && !(timeoutMs >= 0)) return usage("--timeout must be a number of milliseconds");
  const wait = { timeoutMs };
  const params = values.cursor !== undefined ? { cursor: values.cursor } : undefined;
  const [command, ...rest] = positionals;
  let exchange: Exchange;
  switch (command) {
    case "list":
      exchange = (c) => c.mcp.listTools(params, wait);
      break;
    case "resources":
      exchange = (c) => c.mcp.listResources(params, wait);
      break;
    case "call": {
      const [name, json] = rest;
      if (!name) return usage("call needs a tool name");
      let toolArguments: Record<string, unknown> | undefined;
      if (json !== undefined) {
        try {
          toolArguments = JSON.parse(json) as Record<string, unknown>;
        } catch {
          return usage("the tool's arguments are not JSON");
        }
      }
      exchange = (c) => c.mcp.callTool(toolArguments === undefined ? { name } : { name, arguments: toolArguments }, wait);
      break;
    }
    case "read": {
      const [uri] = rest;
      if (!uri) return usage("read needs a resource URI");
      exchange = (c) => c.mcp.readResource({ uri }, wait);
      break;
    }
    case "info":
      exchange = async (c) => (await c.info(wait)) ?? null;
      break;
    case "notifications": {
      const count = values.count === undefined ? Infinity : Number(values.count);
      if (!(count > 0)) return usage("--count must be a positive number");
      exchange = async (c) => {
        const stream = c.mcp.notifications();
        const stop = () => stream.close();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
        let seen = 0;
        for await (const notification of stream) {
          process.stdout.write(`${JSON.stringify(notification)}\n`);
          if (++seen >= count) stream.close();
        }
        return undefined;
      };
      break;
    }
    default:
      return usage(command ? `unknown tools command ${command}` : "which tools command?");
  }

  const databaseUrl = values["database-url"];
  let connection: MultiplexedConnection;
  try {
    connection = await openContainer(values.proxy, {
      revision: values.revision,
      timeoutMs,
      ...(databaseUrl ? { database: databaseUrl } : {}),
      onEvent: (event) => {
        if (event.type === "pairFailed") process.stderr.write(`${event.kind} connection ${event.id}: ${escapeControls(event.error.message)}\n`);
      },
    });
  } catch (problem) {
    return fail(problem);
  }
  try {
    await connection.beginTools(image ? { arguments: beginArguments, image } : { arguments: beginArguments }, wait);
    if (command !== "info") {
      // What the program declares it needs: a missing secret would leave every MCP exchange held.
      const info = await connection.info(wait);
      const declared = info?.frontMatter.secrets ?? [];
      const missing = declared.filter((name) => !(name in secrets));
      if (missing.length > 0) {
        // Said before the wait: a proxy with the secrets gate (the default) holds the exchange until they are fed.
        process.stderr.write(
          `the container's DIVERGE.md declares the secret${missing.length > 1 ? "s" : ""} ${escapeControls(missing.join(", "))}, not given: ` +
            `add ${escapeControls(missing.map((name) => `--secret ${name}=… (or --secret-env ${name})`).join(" "))}. ` +
            `A proxy with the secrets gate (the default) holds every MCP exchange until the program has its secrets; waiting${timeoutMs === 0 ? "" : ` at most ${timeoutMs ?? 60000} ms`}\n`,
        );
      }
      if (missing.length === 0 && (declared.length > 0 || Object.keys(secrets).length > 0)) await connection.feedSecrets(secrets, wait);
    } else if (Object.keys(secrets).length > 0) await connection.feedSecrets(secrets, wait);
    const result = await exchange(connection);
    if (result !== undefined) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return Exit.Ok;
  } catch (problem) {
    if (!(problem instanceof ContainerError)) throw problem;
    return fail(problem);
  } finally {
    await connection.close();
  }
}
