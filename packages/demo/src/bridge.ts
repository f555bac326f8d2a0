// The bridge part of `pnpm demo`: `diverge connect --serve-tools` in front of the example container,
// and a plain MCP SDK client (standing in for an agent, with no Diverge code) listing and calling the
// container's tools through it; first on the multiplexed transport, then on --transport paths.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";

const cli = join(dirname(createRequire(import.meta.url).resolve("@diverge/client/package.json")), "dist", "cli.js");

function show(label: string, value: unknown): void {
  const text = (typeof value === "string" ? value : JSON.stringify(value)).replace(/\s+/g, " ");
  process.stdout.write(`  ${label.padEnd(22)} ${text.length > 150 ? `${text.slice(0, 147)}...` : text}\n`);
}

async function bridge(transport: "multiplexed" | "paths"): Promise<void> {
  process.stdout.write(`\ndiverge connect --serve-tools over the ${transport} transport\n`);
  const app = await startExampleContainer();
  // The paths transport begins nothing, so nobody feeds the secrets: the proxy runs without the gate.
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: transport === "multiplexed" });
  const args = ["connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, "--serve-tools", "127.0.0.1:0"];
  if (transport === "multiplexed") args.push("--arguments", '{"greeting":"Bonjour"}', "--secret-env", "API_KEY");
  show("command", `diverge ${args.join(" ")}`);
  const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, API_KEY: "demo-key" } });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const agent = new Client({ name: "any-agent", version: "1.0.0" });
  try {
    const deadline = Date.now() + 30_000;
    let url: string | undefined;
    while (!(url = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(stderr)?.[0])) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`diverge connect did not start serving: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    show("serving at", url);
    await agent.connect(new StreamableHTTPClientTransport(new URL(url)));
    const { tools } = await agent.listTools();
    show("agent: tools/list", tools.map((tool) => tool.name));
    const greeting = await agent.callTool({ name: "greet", arguments: { name: "Ada" } });
    show("agent: tools/call", greeting.content);
    const readme = await agent.readResource({ uri: "example://readme" });
    show("agent: resources/read", readme.contents);
  } finally {
    await agent.close().catch(() => {});
    child.kill("SIGTERM");
    show("connect exited", `status ${await exited} (SIGTERM)`);
    await proxy.close();
    await app.close();
  }
}

export async function runBridgeDemo(): Promise<void> {
  await bridge("multiplexed");
  await bridge("paths");
}
