// `diverge agent`: begin an agent container through its proxy, enqueue one message, stream the loop's
// chunks to the terminal as they come (folded: text as text, tool calls and results one line each;
// `--json`: one chunk a line), and exit when the loop ends. The program's own asks (its tool calls to
// the provider's MCP server, `--mcp`) are answered meanwhile.
import { escapeControls } from "@diverge/multiplexer/log";
import { parseArgs } from "node:util";
import { randomUUID } from "node:crypto";
import { openContainer } from "../multiplexed/container.js";
import { connectProxy, type PathsConnection } from "../paths/connect.js";
import { relayToMcp, type McpRelay, type McpTarget } from "../families/mcp-outward/relay.js";
import { mcpProviderHandlers } from "../families/mcp-outward/handlers.js";
import { beginPathsAgent } from "../families/agents/paths.js";
import type { Agent } from "../families/agents/agent.js";
import { chunkPrinter } from "./agent-print.js";
import { Exit, exitStatusHelp, fail } from "./exit.js";

export const agentUsage = "  agent      begin an agent container, send it a message and stream its loop (multiplexed or paths)";

const help = `Usage:
  diverge agent --proxy ws://HOST:14979 [--transport multiplexed|paths] [--arguments <json>]
    [--image <name@digest>] [--secret-env NAME]... [--mcp <url> | --mcp-stdio "<command>"]
    [--key <key>] [--json] [--idle-ms <ms>] "message"

Begins the agent container (multiplexed: agents::begin on /, with --arguments and --image, then the
secrets its DIVERGE.md declares, --secret-env; paths: /agent/register), enqueues the message under
--key (default a fresh one), prints the loop as it comes and exits when it ends: text as text, a user
message, reasoning, a tool call and its result one line each, the usage summed at the end; --json
prints every chunk as one JSON line. The multiplexed scope marks no loop's end (A4d), so there the
loop is taken as ended once the agent has been quiet for --idle-ms (default 2000) with no ask of its
own in flight; on paths the loop's stream ends with it. The program's tool calls go to --mcp.
A proxy takes one multiplexed connection in its life: to talk to an agent more than once, hold it
with \`diverge connect --agent\` (or serve it over A2A with --serve-agent).

Flags:
  --proxy <url>             the proxy's provider-facing address (default ws://127.0.0.1:14979)
  --transport <t>           multiplexed (default) or paths
  --arguments <json>        the begin's arguments (default null)
  --image <name@digest>     the begin's image (multiplexed)
  --secret-env <NAME>       a secret whose value is the environment variable of that name (repeatable; multiplexed)
  --mcp <url>               the provider's MCP server (Streamable HTTP) the program's tool calls go to
  --mcp-stdio "<command>"   the same, a command speaking MCP on stdio (split on spaces)
  --key <key>               the message's key (default a fresh one)
  --json                    print each chunk as a JSON line
  --idle-ms <ms>            quiet time that ends the loop on the multiplexed transport (default 2000)
  --timeout <ms>            give up on the begin, DIVERGE.md or secrets after this long (default 60000)
  --revision <r>            the spec revision to speak (default the newest spoken)
  -h, --help                this text

${exitStatusHelp}`;

/** Enqueues `message` on `agent`, prints the loop's chunks with `write` until it ends, and resolves with the fate. */
export async function sendAndPrint(agent: Agent, message: string, options: { key?: string; json?: boolean; idleMs?: number; write: (text: string) => void; say?: (line: string) => void }): Promise<"delivered" | "dequeued"> {
  const printer = chunkPrinter(options.write, { json: options.json });
  const stop = new AbortController();
  const printing = (async () => {
    for await (const chunk of agent.chunks({ signal: stop.signal })) printer.chunk(chunk);
  })();
  const key = options.key ?? `m-${randomUUID().slice(0, 8)}`;
  try {
    const fate = await agent.enqueue(key, message);
    options.say?.(`${key}: ${fate}`);
    if (fate === "delivered") await agent.settled({ idleMs: options.idleMs });
    return fate;
  } finally {
    stop.abort();
    await printing;
    printer.end();
  }
}

export async function runAgent(args: string[]): Promise<number> {
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
        key: { type: "string" },
        json: { type: "boolean", default: false },
        "idle-ms": { type: "string" },
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
    return Exit.Ok;
  }
  const usage = (message: string) => {
    process.stderr.write(`${message}\n\nRun \`diverge agent --help\` for the flags.\n`);
    return Exit.Usage;
  };
  if (positionals.length !== 1) return usage(positionals.length === 0 ? "give the message to send" : "give one message (quote it)");
  const message = positionals[0]!;
  const transport = values.transport;
  if (transport !== "multiplexed" && transport !== "paths") return usage(`--transport must be multiplexed or paths, not ${transport}`);
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
  if (transport === "paths" && (image || (values["secret-env"]?.length ?? 0) > 0)) return usage("--image and --secret-env belong to the multiplexed begin; the paths transport registers the arguments only");
  const secrets: Record<string, string> = {};
  for (const name of values["secret-env"] ?? []) {
    const value = process.env[name];
    if (value === undefined) return usage(`--secret-env ${name}: no such environment variable`);
    secrets[name] = value;
  }
  if (values.mcp !== undefined && values["mcp-stdio"] !== undefined) return usage("give at most one of --mcp and --mcp-stdio");
  const timeoutMs = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutMs !== undefined && !(timeoutMs >= 0)) return usage("--timeout must be a number of milliseconds");
  const idleMs = values["idle-ms"] === undefined ? undefined : Number(values["idle-ms"]);
  if (idleMs !== undefined && !(idleMs >= 0)) return usage("--idle-ms must be a number of milliseconds");

  let target: McpTarget | undefined;
  if (values.mcp !== undefined) target = { url: values.mcp };
  else if (values["mcp-stdio"] !== undefined) {
    const [command, ...rest] = values["mcp-stdio"].split(/\s+/).filter(Boolean);
    if (!command) return usage("--mcp-stdio needs a command");
    target = { command, args: rest };
  }
  // Outside text (an error's message, a tool's name) with its control characters escaped: one line each.
  const onError = (error: Error) => process.stderr.write(`mcp server: ${escapeControls(error.message)}\n`);
  const relay: McpRelay | undefined = target && relayToMcp(target, { onError });
  const say = (line: string) => process.stderr.write(`${escapeControls(line)}\n`);
  const write = (text: string) => void process.stdout.write(text);
  const cleanups: (() => Promise<unknown>)[] = [];
  if (relay) cleanups.push(() => relay.close());
  const cleanUp = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  };
  try {
    let agent: Agent;
    if (transport === "multiplexed") {
      const connection = await openContainer(values.proxy!, { revision: values.revision, timeoutMs, handlers: relay ? mcpProviderHandlers(relay, { onError }) : undefined });
      cleanups.push(() => connection.close());
      agent = await connection.beginAgent(image ? { arguments: beginArguments, image } : { arguments: beginArguments }, { timeoutMs });
      say(`/ begun: ${agent.tools.length} tool${agent.tools.length === 1 ? "" : "s"} declared${agent.tools.length > 0 ? ` (${agent.tools.map((tool) => tool.name).join(", ")})` : ""}`);
      const info = await agent.info({ timeoutMs });
      const declared = info?.frontMatter.secrets ?? [];
      const missing = declared.filter((name) => !(name in secrets));
      if (missing.length > 0) {
        say(`the container's DIVERGE.md declares the secret${missing.length > 1 ? "s" : ""} ${missing.join(", ")}, not given: add ${missing.map((name) => `--secret-env ${name}`).join(" ")}; a proxy with the secrets gate (the default) holds every enqueue until the program has its secrets`);
      } else if (declared.length > 0 || Object.keys(secrets).length > 0) {
        await agent.feedSecrets(secrets, { timeoutMs });
        say(`/ secrets fed (${Object.keys(secrets).length})`);
      }
    } else {
      // The program's asks come on /requests on this transport.
      if (relay) {
        const answering: PathsConnection = connectProxy(values.proxy!, relay, { revision: values.revision });
        cleanups.push(() => answering.close());
      }
      const paths = await beginPathsAgent(values.proxy!, { arguments: beginArguments });
      cleanups.push(() => paths.close());
      agent = paths;
      say("/agent/register: registered");
    }
    const fate = await sendAndPrint(agent, message, { key: values.key, json: values.json, idleMs, write, say });
    await cleanUp();
    return fate === "delivered" ? Exit.Ok : Exit.ExchangeFailed;
  } catch (problem) {
    await cleanUp();
    return fail(problem);
  }
}
