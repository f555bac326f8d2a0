#!/usr/bin/env node
// example-agent: runs the example agent program on 127.0.0.1:$PORT (agents.md §8: a decimal 1–65535,
// else 8080), calling the provider's tools through the proxy's MCP endpoint.
import { parseArgs } from "node:util";
import { DEFAULT_MCP_URL, parseMisbehaviour, portFromEnv, startExampleAgent } from "./agent.js";

const usage = `example-agent [options]

The example agent program: POST /register, GET /schema, POST /secrets, POST /run, POST /enqueue,
POST /dequeue on 127.0.0.1 (and /example/* to watch and steer it from a test).

  --port <n>             port to listen on (default $PORT when it is a decimal 1-65535, else 8080; 0 = a free one)
  --host <address>       address to listen on (default 127.0.0.1)
  --mcp-url <url>        the proxy's program-facing MCP endpoint (default $DIVERGE_MCP_URL, else ${DEFAULT_MCP_URL})
  --misbehave <modes>    comma-separated misbehaviour modes, added to $DIVERGE_EXAMPLE_AGENT_MISBEHAVE
                         (exit-after:N exits the process with status 3 once the Nth event is written)
  --secret <name>        a secret /secrets needs (repeatable; default API_KEY; --secret "" needs none)
  --verbose              log what the loop does to stderr
  --help
`;

const { values } = parseArgs({
  options: {
    port: { type: "string" },
    host: { type: "string" },
    "mcp-url": { type: "string" },
    misbehave: { type: "string", multiple: true },
    secret: { type: "string", multiple: true },
    verbose: { type: "boolean" },
    help: { type: "boolean" },
  },
  strict: true,
});
if (values.help) {
  process.stdout.write(usage);
  process.exit(0);
}
const fail = (text: string): never => {
  process.stderr.write(`example-agent: ${text}\n`);
  process.exit(2);
};

let port = portFromEnv(process.env.PORT);
if (values.port !== undefined) {
  if (!/^[0-9]+$/.test(values.port) || Number(values.port) > 65535) fail(`--port must be a port number from 0 to 65535, not ${JSON.stringify(values.port)}`);
  port = Number(values.port);
}
const misbehave = [process.env.DIVERGE_EXAMPLE_AGENT_MISBEHAVE ?? "", ...(values.misbehave ?? [])].join(",");
try {
  parseMisbehaviour(misbehave);
} catch (error) {
  fail((error as Error).message);
}
const mcpUrl = values["mcp-url"] ?? process.env.DIVERGE_MCP_URL ?? DEFAULT_MCP_URL;
try {
  new URL(mcpUrl);
} catch {
  fail(`--mcp-url is not a URL: ${JSON.stringify(mcpUrl)}`);
}
const requiredSecrets = values.secret === undefined ? undefined : values.secret.filter((name) => name !== "");

const agent = await startExampleAgent({
  port,
  host: values.host ?? "127.0.0.1",
  mcpUrl,
  misbehave,
  ...(requiredSecrets ? { requiredSecrets } : {}),
  onExit: () => {
    process.stderr.write("example-agent: exiting on purpose (exit-after)\n");
    process.exit(3);
  },
  ...(values.verbose ? { log: (line: string) => process.stderr.write(`example-agent: ${line}\n`) } : {}),
}).catch((error: Error) => fail(error.message));
process.stdout.write(`example agent listening on ${agent.url} (tools through ${mcpUrl})\n`);

const stop = () => {
  void agent.close().then(() => process.exit(0));
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
