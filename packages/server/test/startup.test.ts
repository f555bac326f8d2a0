// `diverge-proxy` listens first and loads what serves a path when that path is first used: the
// process is watched with a module loader hook that records every module it loads. And nothing
// changes for whoever comes first: asks made while the modules load wait for them and are served,
// refusals are the same as ever.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { encodeMcpListToolsAnswer } from "@diverge/codec";
import { answerPath, delay, openWs, pathOf, rawUpgradeStatus, RequestsLine } from "./paths-helpers.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const work = mkdtempSync(join(tmpdir(), "diverge-startup-"));
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGTERM");
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

const LISTENING_MARK = "--- the listening line ---";
// A loader hook that appends the URL of every module the proxy loads to a file.
writeFileSync(join(work, "hooks.mjs"), `import { appendFileSync } from "node:fs";\nexport async function load(url, context, next) {\n  appendFileSync(process.env.DIVERGE_LOADED_LOG, url + "\\n");\n  return next(url, context);\n}\n`);
// It also marks the listening line in that file, written before the line itself: a module named above
// the mark was loaded before the proxy said it was listening (the hook appends before the module runs).
writeFileSync(
  join(work, "register.mjs"),
  `import { register } from "node:module";\nimport { appendFileSync } from "node:fs";\nregister(${JSON.stringify(pathToFileURL(join(work, "hooks.mjs")).href)});\n` +
    `const write = process.stdout.write.bind(process.stdout);\n` +
    `process.stdout.write = (chunk, ...rest) => { if (String(chunk).includes("listening")) appendFileSync(process.env.DIVERGE_LOADED_LOG, ${JSON.stringify(LISTENING_MARK)} + "\\n"); return write(chunk, ...rest); };\n`,
);

function start(extraNodeArgs: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [...extraNodeArgs, cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate", "--quiet"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  let stdout = "";
  const line = new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes("\n")) resolve(stdout.split("\n")[0]!);
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code}`)));
  });
  return {
    child,
    ports: line.then((text) => ({
      port: Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(text)![1]),
      programPort: Number(/http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(text)![1]),
    })),
  };
}

/** What the proxy has loaded, by the names the assertions use. */
const HEAVY = {
  ws: /\/node_modules\/ws\//,
  yaml: /\/node_modules\/yaml\//,
  zod: /\/node_modules\/zod\//,
  mcpChecks: /\/codec\/dist\/mcp\.js$/,
  sdkServer: /@modelcontextprotocol\/sdk\/dist\/esm\/server\/(index|streamableHttp)\.js$/,
  sdkClient: /@modelcontextprotocol\/sdk\/dist\/esm\/client\//,
  connection: /\/server\/dist\/multiplexed\/connection\.js$/,
  programMcp: /\/server\/dist\/families\/mcp-outward\/program-mcp\.js$/,
} as const;
type Heavy = keyof typeof HEAVY;

function loaded(log: string): Set<Heavy> {
  const urls = readFileSync(log, "utf8").split("\n");
  return new Set((Object.keys(HEAVY) as Heavy[]).filter((name) => urls.some((url) => HEAVY[name].test(url))));
}

describe("diverge-proxy starts by listening", () => {
  it("loads ws, the MCP checks, the MCP SDK and YAML only when a path that needs them is first used", async () => {
    const log = join(work, "loaded.txt");
    writeFileSync(log, "");
    const { ports } = start(["--import", pathToFileURL(join(work, "register.mjs")).href], { DIVERGE_LOADED_LOG: log });
    const { port, programPort } = await ports;
    await delay(300);
    expect(readFileSync(log, "utf8")).toContain("/server/dist/cli.js");
    // Before the listening line: Node's own modules, cli.js, bind.js, listener.js and the multiplexer's
    // host guard alone (its own entry, `@diverge/multiplexer/guard`: the multiplexer's index would load the codec).
    const beforeListening = readFileSync(log, "utf8").split(LISTENING_MARK)[0]!.split("\n").filter((url) => url !== "" && !url.startsWith("node:"));
    expect(readFileSync(log, "utf8")).toContain(LISTENING_MARK);
    // And the FUSE cache levels (families/fuse/common.js, which imports nothing): `--fuse-cache` is checked while parsing.
    expect(beforeListening.map((url) => url.replace(/^.*\/packages\//, ""))).toEqual(["server/dist/cli.js", "server/dist/bind.js", "server/dist/listener.js", "server/dist/families/fuse/common.js", "multiplexer/dist/guard.js"]);
    expect([...loaded(log)]).toEqual([]);

    // /requests: the WebSocket server, nothing of MCP yet.
    const requests = await RequestsLine.open(port);
    expect([...loaded(log)].sort()).toEqual(["ws"]);

    // The multiplexed connection on /: its code, the MCP checks (zod), YAML. The SDK's client is the
    // proxy's one inward client, shared with /tool/*: loaded at the first exchange with the container's server.
    const multiplexed = await openWs(port, "/");
    const afterConnection = loaded(log);
    for (const name of ["ws", "connection", "mcpChecks", "zod", "yaml"] as const) expect(afterConnection.has(name), name).toBe(true);
    expect(afterConnection.has("sdkServer")).toBe(false);
    expect(afterConnection.has("programMcp")).toBe(false);

    // The program's first request to /mcp: the SDK's server.
    const program = new Client({ name: "program", version: "1.0.0" });
    await program.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${programPort}/mcp`)));
    expect(loaded(log).has("sdkServer")).toBe(true);
    expect(loaded(log).has("programMcp")).toBe(true);
    await program.close();
    multiplexed.terminate();
    requests.socket.terminate();
  });

  it("serves what is asked while it loads, and refuses what it always refused", async () => {
    const { ports } = start([]);
    const { port, programPort } = await ports;
    // Straight after the listening line, nothing loaded yet: two program sessions list tools, the
    // provider takes /requests, a second /requests and a second / are refused, / itself opens.
    const programs = [0, 1].map(() => new Client({ name: "program", version: "1.0.0" }));
    const listed = programs.map((program) =>
      program.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${programPort}/mcp`))).then(() => program.listTools()),
    );
    const requests = RequestsLine.open(port);
    const multiplexed = openWs(port, "/");
    const [secondRequests, secondMultiplexed] = await Promise.all([rawUpgradeStatus(port, "/requests"), (await multiplexed, rawUpgradeStatus(port, "/"))]);
    expect(secondMultiplexed).toBe(409);
    const line = await requests;
    expect(secondRequests).toBe(409);
    for (let i = 0; i < 2; i++) {
      const ask = await line.nextExchange();
      await answerPath(port, pathOf(ask), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [{ name: `tool-${ask.channel}`, inputSchema: { type: "object" } }] } }));
    }
    const results = await Promise.all(listed);
    expect(results.map((r) => r.tools.length)).toEqual([1, 1]);
    for (const program of programs) await program.close();
    (await multiplexed).terminate();
    line.socket.terminate();
  });
});
