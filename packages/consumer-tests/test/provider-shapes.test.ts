// Issue 26 §2-§4 from a consumer's side: the provider code of the READMEs run against the installed
// tarballs (project/provider-shapes.mjs, a real proxy in front of the example program), a real
// PostgreSQL for the `database:` forms, and the binaries' own words.
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
// The client's throwaway PostgreSQL (initdb into a temp folder, a free loopback port, its socket).
import { startThrowawayPostgres, type ThrowawayPostgres } from "../../client/test/multiplexed-postgres-server.js";
import { cleanEnv } from "./global-setup.js";
import { workspacePath } from "./packages.js";

const { project } = inject("consumer");

function scenario(name: string, env: Record<string, string> = {}): Record<string, unknown> {
  const result = spawnSync(process.execPath, ["provider-shapes.mjs", name], { cwd: project, env: { ...cleanEnv(), ...env }, encoding: "utf8", timeout: 180_000 });
  expect(result.error).toBeUndefined();
  expect({ status: result.status, stderr: result.stderr.split("\n").filter((l) => l && !/^\(Use `node --trace-warnings/.test(l) && !/DIVERGE_DATABASE_URL_PARTS/.test(l)) }).toEqual({ status: 0, stderr: [] });
  return JSON.parse(result.stdout) as Record<string, unknown>;
}

describe("one handler shape (issue 26 §2)", () => {
  it("openContainer(url, { handlers: relayToMcp(…) }) and connectProxy(url, relayToMcp(…)) both answer the program's outward MCP; a not-served ask names its exchange", () => {
    const out = scenario("shapes");
    expect(out.openContainer).toEqual([{ type: "text", text: "Hello, Shape!" }]);
    expect(out.connectProxy).toEqual([{ type: "text", text: "Hello, Paths!" }]);
    // "tools/list: the provider did not serve the exchange (channel 1)": the exchange first.
    expect((out.notServed as { error: string }).error).toMatch(/tools\/list: the provider did not serve the exchange/);
  });
});

describe("the database option's forms, against a real PostgreSQL (issue 26 §2)", () => {
  let database: ThrowawayPostgres;
  beforeAll(async () => {
    database = await startThrowawayPostgres();
  });
  afterAll(async () => {
    await database?.stop();
  });

  it("{ host, port }, { path } and a URL all reach it, the driver's user and database go through, and the URL's unusable parts are named once (DIVERGE_DATABASE_URL_PARTS)", () => {
    const out = scenario("database", { PG_PORT: String(database.port), PG_SOCKET_DIR: database.socketDir });
    const reached = { who: "postgres", db: "postgres", n: 42 };
    expect(out.hostPort).toEqual(reached);
    expect(out.path).toEqual(reached);
    // The URL's user, password, database and sslmode are not the pipe's: the program's driver speaks.
    expect(out.url).toEqual(reached);
    const warnings = out.warnings as { code: string; message: string }[];
    expect(warnings.map((w) => w.code)).toEqual(["DIVERGE_DATABASE_URL_PARTS"]);
    expect(warnings[0]!.message).toMatch(/user, password, database, sslmode/);
    expect(warnings[0]!.message).not.toContain("hunter2");
  });

  it("diverge connect --database-url says the same once, as a line of its own, and the program's driver reaches the database through it", () => {
    const out = scenario("connectDatabase", { DATABASE_URL: `postgres://someone:hunter2@127.0.0.1:${database.port}/elsewhere?sslmode=require` });
    expect(out.row).toEqual({ who: "postgres", db: "postgres", n: 42 });
    const said = (out.stderr as string[]).filter((line) => /only the host and port of the URL are used/.test(line));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/user, password, database, sslmode/);
    expect((out.stderr as string[]).join("\n")).not.toContain("hunter2");
  });
});

describe("LiveTree.get() takes the paths() text (issue 26 §3)", () => {
  it("finds every path paths() gives, and the same node by its components", () => {
    const out = scenario("tree");
    expect(out.paths).toEqual(["DIVERGE.md", "src", "src/main.rs"]);
    expect(out.found).toEqual(["DIVERGE.md", "src", "main.rs"]);
    expect(out.components).toBe("main.rs");
  });
});

describe("diverge connect --help and diverge answer --help agree on a stdio MCP server (issue 26 §4)", () => {
  const help = (command: string) => spawnSync(join(project, "node_modules", ".bin", "diverge"), [command, "--help"], { cwd: project, env: cleanEnv(), encoding: "utf8" }).stdout;

  it("both give it as `-- <command> [args...]`, its argv as given", () => {
    for (const command of ["connect", "answer"]) {
      const text = help(command);
      expect(text, command).toMatch(/(^|\s)-- <command> \[args\.\.\.\]/m);
      // No usage line gives the space-split `--mcp-stdio "<command>"` as the way.
      expect(text.split("\n").filter((l) => /^\s*--mcp-stdio\b/.test(l)), command).toEqual([]);
    }
  });

  it("and both run one so: `-- node stdio-mcp.mjs \"Good day\"` answers the program's MCP with its argv as given", () => {
    const out = scenario("stdio");
    expect(out.connect).toEqual([{ type: "text", text: "Good day, 1 argument(s)!" }]);
    expect(out.answer).toEqual([{ type: "text", text: "Good day, 1 argument(s)!" }]);
  });
});

describe("the vault's ttl, as the README and the 400 say it (issue 26 §4)", () => {
  it("a lock of ttl 0 is the installed proxy's 400, whose range is the README's: from 1, never from 0", async () => {
    const readme = readFileSync(workspacePath("README.md"), "utf8");
    const range = /ttl missing or not from (\d+) to (\d+)/.exec(readme);
    expect(range, "the root README's vault row").not.toBeNull();
    const proxy = spawn(join(project, "node_modules", ".bin", "diverge-proxy"), ["--port", "0", "--host", "127.0.0.1", "--program-port", "0", "--pg-port", "0", "--app-port", "1", "--root", project, "--no-secrets-gate", "--quiet"], { cwd: project, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] });
    try {
      const programPort = await new Promise<string>((resolve, reject) => {
        let output = "";
        // A hang guard, not a timing assertion.
        const guard = setTimeout(() => reject(new Error(`no listening line:\n${output}`)), 120_000);
        const take = (chunk: Buffer) => {
          output += chunk.toString();
          const port = /program http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(output)?.[1];
          if (port) {
            clearTimeout(guard);
            resolve(port);
          }
        };
        proxy.stdout!.on("data", take);
        proxy.stderr!.on("data", take);
      });
      for (const ttl of ["0", "4294967296", "x"]) {
        const response = await fetch(`http://127.0.0.1:${programPort}/vault/k/lock?ttl=${ttl}`, { method: "POST" });
        expect({ ttl, status: response.status, text: await response.text() }).toEqual({ ttl, status: 400, text: `ttl must be a number of seconds from ${range![1]} to ${range![2]}\n` });
      }
      expect(range![1]).toBe("1");
    } finally {
      proxy.kill("SIGTERM");
    }
  });
});
