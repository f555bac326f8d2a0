// `diverge connect --agent` and `--serve-agent`: the agent container held with the other backends.
// `--agent` begins an agent container instead of a tool container (agents::begin on /, or
// /agent/register on paths), enqueues each line of stdin as one message and prints the loop on stdout
// as it comes (folded as `diverge agent` prints it; `--agent-json`: one chunk a line).
// `--serve-agent HOST:PORT` serves the agent over A2A (serveAgentA2a) for as long as the command runs.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import { createInterface } from "node:readline";
import type { Agent } from "../families/agents/agent.js";
import { serveAgentA2a, type ServingAgent } from "../families/agents/a2a.js";
import { parseHostPort } from "../families/mcp-inward/serve-tools.js";
import { chunkPrinter } from "./agent-print.js";
import { BackendError, fail } from "./exit.js";

export const agentConnectUsage = `    [--agent [--agent-json]] [--serve-agent <host:port> [--serve-agent-idle-ms <ms>] [--serve-agent-stream-buffer-bytes <n>]
      [--allow-host <name>]... [--allow-origin <origin>]...]   (an agent container)`;

export const agentConnectHelp = `  --agent                   the container is an agent container: begin it with agents::begin (paths:
                            /agent/register, with --arguments), enqueue each line of stdin as one
                            message, and print its loop on stdout as it comes
  --agent-json              print the loop's chunks as JSON lines instead
  --serve-agent <host:port> serve the agent container over the Agent2Agent protocol (A2A 0.3: JSON-RPC
                            at http://host:port/, its card at /.well-known/agent-card.json); implies
                            an agent container's begin
  --serve-agent-idle-ms <ms>
                            quiet time after which an A2A task's loop is taken as ended on the
                            multiplexed transport, which marks no loop's end (default 2000)
  --serve-agent-stream-buffer-bytes <n>
                            bytes of a message/stream an A2A client may leave unread (default 4 MiB):
                            past them its stream ends with an error event saying it read too slowly
                            The A2A server checks Host and Origin as --serve-tools does (loopback only;
                            --allow-host and --allow-origin widen it), reads a request body of at most
                            twice --max-message-bytes (413 past it), and refuses a message larger than
                            --max-message-bytes with a JSON-RPC error (-32600), sending nothing`;

export const agentConnectOptions = {
  agent: { type: "boolean", default: false },
  "agent-json": { type: "boolean", default: false },
  "serve-agent": { type: "string" },
  "serve-agent-idle-ms": { type: "string" },
  "serve-agent-stream-buffer-bytes": { type: "string" },
} as const;

export interface AgentConnectFlags {
  readonly agent?: boolean;
  readonly "agent-json"?: boolean;
  readonly "serve-agent"?: string;
  readonly "serve-agent-idle-ms"?: string;
  readonly "serve-agent-stream-buffer-bytes"?: string;
  readonly "allow-host"?: string[];
  readonly "allow-origin"?: string[];
  readonly "serve-tools"?: string;
  readonly "serve-tools-stdio"?: boolean;
}

/** Whether the flags ask for an agent container. */
export function wantsAgent(values: AgentConnectFlags): boolean {
  return values.agent === true || values["serve-agent"] !== undefined;
}

/** What is wrong with the agent flags, or undefined. */
export function agentFlagsProblem(values: AgentConnectFlags): string | undefined {
  if (values["agent-json"] && !values.agent) return "--agent-json belongs to --agent";
  if (values["serve-agent"] !== undefined && !parseHostPort(values["serve-agent"])) return "--serve-agent must be <host>:<port>, e.g. 127.0.0.1:7100";
  if (values["serve-agent-idle-ms"] !== undefined && (values["serve-agent"] === undefined || !(Number(values["serve-agent-idle-ms"]) >= 0))) return "--serve-agent-idle-ms is a number of milliseconds, with --serve-agent";
  const buffer = values["serve-agent-stream-buffer-bytes"];
  if (buffer !== undefined && (values["serve-agent"] === undefined || !(Number.isInteger(Number(buffer)) && Number(buffer) > 0))) return "--serve-agent-stream-buffer-bytes is a whole number of bytes above 0, with --serve-agent";
  if (wantsAgent(values) && (values["serve-tools"] !== undefined || values["serve-tools-stdio"])) return "an agent container has no tools to serve: give --serve-tools or --agent/--serve-agent, not both";
  return undefined;
}

/** Holds the begun agent: stdin's lines as messages and the loop on stdout (--agent), A2A (--serve-agent). */
export async function holdAgent(agent: Agent, values: AgentConnectFlags, say: Say, error: Say = (line) => void process.stderr.write(`${line}\n`)): Promise<{ close(): Promise<void> } | number> {
  let serving: ServingAgent | undefined;
  const serveAt = values["serve-agent"] === undefined ? undefined : parseHostPort(values["serve-agent"]);
  if (serveAt) {
    try {
      serving = await serveAgentA2a(agent, {
        host: serveAt.host,
        port: serveAt.port,
        idleMs: values["serve-agent-idle-ms"] === undefined ? undefined : Number(values["serve-agent-idle-ms"]),
        streamBufferBytes: values["serve-agent-stream-buffer-bytes"] === undefined ? undefined : Number(values["serve-agent-stream-buffer-bytes"]),
        guard: { hosts: values["allow-host"] ?? [], origins: values["allow-origin"] ?? [] },
        log: say,
      });
    } catch (problem) {
      return fail(new BackendError("--serve-agent", (problem as Error).message));
    }
    // Said even with --quiet: with port 0 it is the only way to learn where.
    error(`serving the agent over A2A at ${serving.url} (card at ${serving.url}.well-known/agent-card.json)`);
  }
  const stop = new AbortController();
  let lines: ReturnType<typeof createInterface> | undefined;
  if (values.agent) {
    const printer = chunkPrinter((text) => void process.stdout.write(text), { json: values["agent-json"] });
    void (async () => {
      for await (const chunk of agent.chunks({ signal: stop.signal })) printer.chunk(chunk);
      printer.end();
    })();
    lines = createInterface({ input: process.stdin, terminal: false });
    let count = 0;
    lines.on("line", (line) => {
      if (line.trim() === "") return;
      const key = `stdin-${++count}`;
      agent.enqueue(key, line).then(
        (fate) => say(...logEvent(`${key}: {fate}`, { fate })),
        (problem: unknown) => error(...logEvent(`${key}: {error}`, { error: problem instanceof Error ? problem.message : String(problem) })),
      );
    });
  }
  return {
    async close() {
      stop.abort();
      lines?.close();
      await serving?.close();
    },
  };
}
