// `diverge answer`: relay a proxy's MCP asks to an MCP server until interrupted.
import { parseArgs } from "node:util";
import { connectProxy, type ProxyHandlers } from "../paths/connect.js";
import { relayToMcp, type McpRelay, type McpTarget } from "../families/mcp-outward/relay.js";
import { commandExec } from "../families/command/exec.js";
import { PostgresVault } from "../families/vault/store.js";
import { mkdirSync } from "node:fs";
import { BackendError, Exit, exitStatusHelp, fail } from "./exit.js";
import { sayPathsEvents } from "./paths-events.js";

export const answerUsage = "  answer     answer a proxy's asks (/requests): MCP relayed to an MCP server, commands run by an executable";

const help = `Usage:
  diverge answer --proxy ws://127.0.0.1:14979 --mcp http://127.0.0.1:3000/mcp
  diverge answer --proxy ws://127.0.0.1:14979 -- <command> [args...]
  diverge answer --proxy ws://127.0.0.1:14979 --command-exec ./run-command

Holds the proxy's /requests connection (dialled again with backoff when it ends) and answers every
MCP ask (list tools, list resources, call tool, read resource, notifications) by forwarding it to an
MCP server: a Streamable HTTP endpoint (--mcp) or a command speaking MCP on stdio (after --).
With --command-exec, each command runs that executable once with the command's bytes on stdin;
each line it writes to stdout is one item; exit status 0 ends the command cleanly, any other the
error {"exit":<status>,"stderr":"<last 4 KiB of stderr>"}. Vault asks are always answered, from
PostgreSQL at --vault-database-url, else from an embedded PGlite database in --vault-dir (default in
memory: it lasts this run and leaves nothing behind); the tables are created on first use. The
vault's locks are held by the container: --container-id, else a random id of this run. Asks with
no answerer here (postgres, FUSE, and MCP or command without their flags) are declined. Runs until
SIGINT or SIGTERM.

The secrets gate: a proxy started without --no-secrets-gate holds every MCP exchange (so no ask
reaches this command) until the program inside has taken its secrets, which a provider feeds on
the multiplexed connection (\`diverge tools … --secret\`, or openContainer + feedSecrets). The proxy
logs a line when it first holds one. Start the proxy with --no-secrets-gate when the program
declares no secrets.

Flags:
  --proxy <url>   the proxy's provider-facing address (default ws://127.0.0.1:14979)
  --mcp <url>     the MCP server's Streamable HTTP endpoint
  --command-exec <executable>
                  run each command with this executable
  --vault-database-url <url>
                  keep the vault in this PostgreSQL
  --vault-dir <dir>
                  keep the vault in an embedded PGlite database here (without a URL)
  --vault-namespace <name>
                  which store the keys live in (default "default")
  --container-id <id>
                  who holds the vault's locks: the container's own id, so a restarted provider
                  holds (refreshes, unlocks) what it held; default a random id of this run, whose
                  locks are nobody's once it ends, until their time runs out
  --revision <r>  the spec revision to speak (default the newest spoken)
  --quiet         print nothing but errors
  -h, --help      this text

This is the narrow form of \`diverge connect --transport paths\` (which also serves the container's
database, and its tools as an MCP server).

${exitStatusHelp}`;

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
        "command-exec": { type: "string" },
        "vault-database-url": { type: "string" },
        "vault-dir": { type: "string" },
        "vault-namespace": { type: "string", default: "default" },
        "container-id": { type: "string" },
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
    return 0;
  }
  let target: McpTarget | undefined;
  if (values.mcp && command.length === 0) target = { url: values.mcp };
  else if (!values.mcp && command.length > 0) target = { command: command[0]!, args: command.slice(1) };
  else if (values.mcp || !(values["command-exec"] || values["vault-database-url"] || values["vault-dir"])) {
    process.stderr.write(`give at most one MCP server (--mcp <url> or -- <command> [args...]) and something to answer: an MCP server, --command-exec, or a vault (--vault-database-url, --vault-dir)\n\n${help}`);
    return Exit.Usage;
  }
  let stopping = false;
  const say = (line: string) => {
    if (!values.quiet) process.stderr.write(`${line}\n`);
  };
  const relay: McpRelay | undefined = target && relayToMcp(target, { onError: (error) => process.stderr.write(`mcp server: ${error.message}\n`) });
  const executable = values["command-exec"];
  // The vault's lock holder is the container: --container-id, else a random id of this run (never the --proxy URL).
  const vaultOptions = { namespace: values["vault-namespace"]!, holder: values["container-id"] };
  let vault: PostgresVault;
  try {
    if (values["vault-database-url"]) {
      vault = await PostgresVault.connect(values["vault-database-url"], vaultOptions);
      say(`vault in PostgreSQL (namespace ${vaultOptions.namespace})`);
    } else {
      // Without --vault-dir, in memory: nothing is left behind (the vault lasts this run).
      const dir = values["vault-dir"];
      if (dir !== undefined) mkdirSync(dir, { recursive: true });
      vault = PostgresVault.embedded(dir, vaultOptions);
      say(`vault in ${dir ?? "memory, for this run"} (embedded PGlite, namespace ${vaultOptions.namespace})`);
    }
  } catch (problem) {
    await relay?.close();
    return fail(new BackendError("the vault", (problem as Error).message));
  }
  // The relay's MCP handlers, and the vault and command handlers beside them.
  const handlers: ProxyHandlers = Object.assign(Object.create(relay ?? null) as ProxyHandlers, vault.handlers(), executable ? { command: commandExec(executable) } : {});
  if (executable) say(`commands run ${executable}`);
  const connection = connectProxy(values.proxy!, handlers, {
    revision: values.revision,
    onEvent: sayPathsEvents(values.proxy!, say, () => stopping),
  });
  await new Promise<void>((resolve) => {
    const stop = () => {
      // Stopped within a second whatever holds the process (a command's children, a backend's close);
      // a command's group is SIGKILLed on exit.
      setTimeout(() => process.exit(0), 900).unref();
      resolve();
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  stopping = true;
  say("stopping");
  await connection.close();
  await relay?.close();
  await vault.close();
  return 0;
}
