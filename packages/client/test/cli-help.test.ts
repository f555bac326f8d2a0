// `diverge connect --help` and `diverge answer --help` agree (issue 26 §4): one way to give a stdio MCP
// server, after `--` with its real argv, and what `answer` serves said the same in both.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: "utf8", timeout: 30_000 });

describe("connect and answer give a stdio MCP server one way", () => {
  const connect = run("connect", "--help").stdout;
  const answer = run("answer", "--help").stdout;

  it("both take the command after `--`, with its argv as given", () => {
    expect(connect).toContain("-- <command> [args...]");
    expect(answer).toContain("-- <command> [args...]");
    expect(connect).not.toMatch(/^\s+\[--mcp <url> \| --mcp-stdio/m);
  });

  it("say the same of what answer serves: MCP, command and vault", () => {
    expect(connect).toContain("MCP, command and vault only");
    expect(answer).toMatch(/MCP ask/);
    expect(answer).toMatch(/--command-exec/);
    expect(answer).toMatch(/Vault asks are always answered/);
  });

  it("connect reads `--` as the MCP server's argv: refused beside --mcp, refused when empty", () => {
    const both = run("connect", "--mcp", "http://127.0.0.1:1/mcp", "--", "node", "server.mjs", "an argument with spaces");
    expect(both.status).toBe(2);
    expect(both.stderr).toContain("give at most one MCP server");
    const empty = run("connect", "--");
    expect(empty.status).toBe(2);
    expect(empty.stderr).toContain("-- needs the command of an MCP server on stdio");
  });
});
