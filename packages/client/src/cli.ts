#!/usr/bin/env node
// diverge: the provider side from a shell. Each subcommand lives in its own module under commands/.
import { runAnswer, answerUsage } from "./commands/answer.js";
import { runTools, toolsUsage } from "./commands/tools.js";
import { runConnect, connectUsage } from "./commands/connect.js";
import { exitStatusHelp, fail } from "./commands/exit.js";
import { runFs, fsUsage } from "./commands/fs.js";
import { runAgent, agentUsage } from "./commands/agent.js";

const usage = `diverge: the provider side of the Diverge container-proxy protocol.

Commands:
${connectUsage}
${answerUsage}
${toolsUsage}
${fsUsage}
${agentUsage}
Run \`diverge <command> --help\` for a command's flags. \`connect\` holds the proxy for as long as it
runs; \`tools\` makes one exchange and ends (the proxy accepts one multiplexed connection in its life).

${exitStatusHelp}`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h") {
    process.stdout.write(usage);
    return command ? 0 : 2;
  }
  if (command === "connect") return runConnect(rest);
  if (command === "answer") return runAnswer(rest);
  if (command === "tools") return runTools(rest);
  if (command === "fs") return runFs(rest);
  if (command === "agent") return runAgent(rest);
  process.stderr.write(`unknown command ${command}\n\n${usage}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.exitCode = fail(error);
  },
);
