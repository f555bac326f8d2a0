// The `example-agent` command (the built dist/cli.js, as a container would run it): PORT as agents.md §8
// reads it, DIVERGE_MCP_URL for the tools, modes from DIVERGE_EXAMPLE_AGENT_MISBEHAVE, exit-after:N
// exiting the process.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { exampleAgentRoot, portFromEnv } from "../src/index.js";
import { message, post, startRun, startToolServer, type ToolServer } from "./helpers.js";

const cli = join(exampleAgentRoot, "dist", "cli.js");
let tools: ToolServer;
const children: ChildProcess[] = [];
beforeAll(async () => {
  tools = await startToolServer();
});
afterAll(async () => {
  await tools.close();
});
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

interface Running {
  readonly child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<number | null>;
  readonly stderr: () => string;
}

/** Starts the command and waits for its listening line. */
function run(args: string[], env: Record<string, string | undefined> = {}): Promise<Running> {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, PORT: undefined, DIVERGE_EXAMPLE_AGENT_MISBEHAVE: undefined, ...env } });
  children.push(child);
  let stderr = "";
  child.stderr!.on("data", (data: Buffer) => (stderr += data.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let stdout = "";
    child.stdout!.on("data", (data: Buffer) => {
      stdout += data.toString();
      const listening = /listening on (http:\/\/\S+)/.exec(stdout);
      if (listening) resolve({ child, url: listening[1]!, exited, stderr: () => stderr });
    });
    void exited.then((code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
}

/** Runs the command to its exit. */
function runToExit(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (data: Buffer) => (stdout += data.toString()));
  child.stderr!.on("data", (data: Buffer) => (stderr += data.toString()));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, stdout, stderr })));
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("PORT", () => {
  it("is a decimal 1–65535 with no surrounding whitespace, otherwise 8080", () => {
    expect(portFromEnv("8081")).toBe(8081);
    expect(portFromEnv("1")).toBe(1);
    expect(portFromEnv("65535")).toBe(65535);
    for (const text of [undefined, "", "0", "65536", " 8081", "8081 ", "+8081", "80a", "0x50", "8e3", "-1"]) expect(portFromEnv(text)).toBe(8080);
  });
});

describe("the example-agent command", () => {
  it("listens on $PORT and calls the tools at $DIVERGE_MCP_URL", async () => {
    const port = await freePort();
    const agent = await run([], { PORT: String(port), DIVERGE_MCP_URL: tools.url });
    expect(agent.url).toBe(`http://127.0.0.1:${port}`);
    expect((await post(agent.url, "/register", { arguments: {} })).status).toBe(200);
    const { stream } = await startRun(agent.url, [message("k1", 'tool:echo {"text":"from the command"}')]);
    const result = (await stream.rest()).find((chunk) => chunk.type === "tool_response");
    expect(result).toMatchObject({ content: [{ type: "text", text: "from the command" }] });
    agent.child.kill("SIGTERM");
    expect(await agent.exited).toBe(0);
  });

  it("takes --port, --mcp-url and --secret", async () => {
    const agent = await run(["--port", "0", "--mcp-url", tools.url, "--secret", "TOKEN"]);
    expect((await post(agent.url, "/secrets", { API_KEY: "k" })).status).toBe(422);
    expect((await post(agent.url, "/secrets", { TOKEN: "t" })).status).toBe(200);
  });

  it("exits with status 3 once exit-after:N has written N events", async () => {
    const agent = await run(["--port", "0"], { DIVERGE_EXAMPLE_AGENT_MISBEHAVE: "exit-after:3" });
    expect((await post(agent.url, "/register", { arguments: {} })).status).toBe(200);
    const { stream } = await startRun(agent.url, [message("k1", "hello there")]);
    expect(await stream.drain()).toBe("abrupt");
    expect(stream.events).toHaveLength(3);
    expect(await agent.exited).toBe(3);
    expect(agent.stderr()).toContain("exit-after");
  });

  it("takes modes from --misbehave too, and refuses modes it does not know", async () => {
    const agent = await run(["--port", "0", "--misbehave", "run-5xx"]);
    expect((await post(agent.url, "/register", { arguments: {} })).status).toBe(200);
    expect((await post(agent.url, "/run", { messages: [message("k1", "hi")] })).status).toBe(500);
    const refused = await runToExit(["--misbehave", "run-6xx"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("unknown misbehaviour");
    const help = await runToExit(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--mcp-url");
  });
});
