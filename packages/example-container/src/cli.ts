#!/usr/bin/env node
// diverge-example-container: runs the example program on $PORT (default 8080).
import { startExampleContainer } from "./index.js";

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
if (args.includes("--help")) {
  process.stdout.write("diverge-example-container [--port N (default $PORT, else 8080)] [--pg-port N (default 14981)]\n");
  process.exit(0);
}
const port = Number(flag("--port") ?? process.env.PORT ?? 8080);
const pgPort = Number(flag("--pg-port") ?? 14981);
const container = await startExampleContainer({ port, pgPort });
process.stdout.write(`example container listening on ${container.url}\n`);
