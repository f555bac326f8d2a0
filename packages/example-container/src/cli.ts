#!/usr/bin/env node
// diverge-example-container: runs the example program (the guide's Greeter) on $PORT (default 8080),
// needing nothing beside it; `--root` prints the folder holding its DIVERGE.md for `diverge-proxy --root`.
import { exampleRoot, startExampleContainer } from "./index.js";

const usage = `Usage: diverge-example-container [flags]

The example tool-container program (the Greeter of the guide's "Write a container program"): its
HTTP server answers POST /register, POST /secrets and MCP at /mcp. Put diverge-proxy in front of it:

  diverge-example-container & diverge-proxy --root "$(diverge-example-container --root)"

Flags:
  --port <n>      the program's HTTP port, the proxy's --app-port (default $PORT, else 8080)
  --host <h>      the interface it listens on (default 127.0.0.1, beside the proxy)
  --pg-port <n>   where its query tool's database driver connects: the proxy's --pg-port
                  (default 14981)
  --root          print the container root (the folder holding DIVERGE.md) and exit
  -h, --help      this text

Stops on SIGINT or SIGTERM.
`;

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
if (args.includes("--help") || args.includes("-h")) {
  process.stdout.write(usage);
  process.exit(0);
}
if (args.includes("--root")) {
  process.stdout.write(`${exampleRoot}\n`);
  process.exit(0);
}
const port = Number(flag("--port") ?? process.env.PORT ?? 8080);
const pgPort = Number(flag("--pg-port") ?? 14981);
const container = await startExampleContainer({ port, pgPort, host: flag("--host") ?? "127.0.0.1" });
process.stdout.write(`example container listening on ${container.url}\n`);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void container.close().then(() => process.exit(0)));
