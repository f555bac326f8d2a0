// `diverge answer`: relay a proxy's MCP asks to an MCP server until interrupted.
import { parseArgs } from "node:util";
import { connectProxy } from "../paths/connect.js";
import { relayToMcp, type McpTarget } from "../paths/relay.js";

export const answerUsage = "  answer     relay a proxy's MCP asks (/requests) to an MCP server until interrupted";

const help = `Usage:
  diverge answer --proxy ws://127.0.0.1:14979 --mcp http://127.0.0.1:3000/mcp
  diverge answer --proxy ws://127.0.0.1:14979 -- <command> [args...]

Holds the proxy's /requests connection (dialled again with backoff when it ends) and answers every
MCP ask (list tools, list resources, call tool, read resource, notifications) by forwarding it to an
MCP server: a Streamable HTTP endpoint (--mcp) or a command speaking MCP on stdio (after --).
Other asks (vault, command, postgres, FUSE) are declined. Runs until SIGINT or SIGTERM.

The secrets gate: a proxy started without --no-secrets-gate holds every MCP exchange (so no ask
reaches this command) until the program inside has taken its secrets, which a provider feeds on
the multiplexed connection (\`diverge tools … --secret\`, or openContainer + feedSecrets). The proxy
logs a line when it first holds one. Start the proxy with --no-secrets-gate when the program
declares no secrets.

Flags:
  --proxy <url>   the proxy's provider-facing address (default ws://127.0.0.1:14979)
  --mcp <url>     the MCP server's Streamable HTTP endpoint
  --revision <r>  the spec revision to speak (default the newest spoken)
  --quiet         print nothing but errors
  -h, --help      this text
`;

export async function runAnswer(args: string[]): Promise<number> {
  const split = args.indexOf("--");
  const own = split < 0 ? args : args.slice(0, split);
  const command = split < 0 ? [] : args.slice(split + 1);
  let parsed;
  try {
    parsed = parseArgs({
      args: own,
      options: {
        proxy: { type: "string", default: "ws://127.0.0.1:14979" },
        revision: { type: "string" },
        mcp: { type: "string" },
        quiet: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (problem) {
    process.stderr.write(`${(problem as Error).message}\n\n${help}`);
    return 2;
  }
  const { values } = parsed;
  if (values.help) {
    process.stdout.write(help);
    return 0;
  }
  let target: McpTarget;
  if (values.mcp && command.length === 0) target = { url: values.mcp };
  else if (!values.mcp && command.length > 0) target = { command: command[0]!, args: command.slice(1) };
  else {
    process.stderr.write(`give exactly one MCP server: --mcp <url> or -- <command> [args...]\n\n${help}`);
    return 2;
  }
  let stopping = false;
  const say = (line: string) => {
    if (!values.quiet) process.stderr.write(`${line}\n`);
  };
  const relay = relayToMcp(target, { onError: (error) => process.stderr.write(`mcp server: ${error.message}\n`) });
  const connection = connectProxy(values.proxy!, relay, {
    revision: values.revision,
    onEvent: (event) => {
      switch (event.type) {
        case "requestsOpened":
          return say(`connected to ${values.proxy}/requests`);
        case "requestsClosed":
          return say(`/requests ended (${event.ending.clean ? "closed" : "abruptly"})${event.redial ? "; dialling again" : ""}`);
        case "ask":
          return say(`ask ${event.ask.channel}: ${event.ask.kind}`);
        case "pathEnded":
          return say(`${event.path}: ${event.outcome}`);
        case "error":
          // Once stopping, the paths being cut are not news.
          if (stopping) return;
          return process.stderr.write(`${event.error.message}\n`);
      }
    },
  });
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  stopping = true;
  say("stopping");
  await connection.close();
  await relay.close();
  return 0;
}
