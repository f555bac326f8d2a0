// The `diverge-proxy` binary, run as a process (built dist/cli.js, as `pnpm test` builds first).
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { encodeMcpListToolsAnswer } from "@diverge/codec";
import { answerPath, pathOf, RequestsLine, upgradeStatus } from "./paths-helpers.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGTERM");
});

function run(args: string[]): { child: ChildProcess; output: Promise<{ code: number | null; stdout: string; stderr: string }>; firstLine: Promise<string> } {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let stdout = "";
  let stderr = "";
  let gotLine: (line: string) => void;
  const firstLine = new Promise<string>((resolve) => (gotLine = resolve));
  child.stdout!.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
    if (stdout.includes("\n")) gotLine(stdout.split("\n")[0]!);
  });
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const output = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("exit", (code) => {
      gotLine("");
      resolve({ code, stdout, stderr });
    }),
  );
  return { child, output, firstLine };
}

describe("diverge-proxy (built: run `pnpm build` first)", () => {
  it("prints its flags with --help", async () => {
    const { output } = run(["--help"]);
    const { code, stdout } = await output;
    expect(code).toBe(0);
    for (const flag of ["--port", "--program-port", "--app-port", "--root", "--pg-port", "--host", "--no-secrets-gate", "--max-message-bytes"]) expect(stdout).toContain(flag);
    expect(stdout).toContain("default 0.0.0.0");
  });

  it("warns when --root is left at /, and not when it is given", { timeout: 120_000 }, async () => {
    const started = async (args: string[]) => {
      const { child, output, firstLine } = run(["--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", ...args]);
      await firstLine;
      // The options line comes once the proxy serves; the warning, if any, is said right after it.
      let stderr = "";
      child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      for (const deadline = Date.now() + 60_000; !/diverge-proxy options .*\n/.test(stderr) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 200));
      child.kill("SIGTERM");
      await output;
      return stderr;
    };
    expect(await started([])).toContain("warning: --root is / (the default)");
    expect(await started(["--root", fileURLToPath(new URL(".", import.meta.url))])).not.toContain("warning: --root");
  });

  it("refuses a bad flag or port with exit code 2", async () => {
    expect((await run(["--port", "seventy"]).output).code).toBe(2);
    expect((await run(["--no-such-flag"]).output).code).toBe(2);
    expect((await run(["--max-message-bytes", "0"]).output).code).toBe(2);
  });

  it("serves /requests and the program's MCP endpoint on the ports it is given", async () => {
    const { firstLine, child, output } = run(["--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate", "--max-message-bytes", "65536", "--quiet"]);
    const line = await firstLine;
    const port = Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)![1]);
    const programPort = Number(/http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(line)![1]);
    const requests = await RequestsLine.open(port);
    expect(await upgradeStatus(port, "/requests")).toBe(409);
    const client = new Client({ name: "program", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${programPort}/mcp`)));
    const tools = client.listTools();
    const ask = await requests.nextExchange();
    await answerPath(port, pathOf(ask), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [{ name: "from-cli", inputSchema: { type: "object" } }] } }));
    expect((await tools).tools[0]!.name).toBe("from-cli");
    await client.close();
    requests.socket.terminate();
    child.kill("SIGINT");
    expect((await output).code).toBe(0);
  });

  it("maps every flag onto the proxy's options, and holds MCP behind the secrets gate by default", async () => {
    const { firstLine, child, output } = run(["--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", "8123", "--root", "/tmp/container-root", "--max-message-bytes", "4096"]);
    const line = await firstLine;
    expect(line).toContain("held until the program takes its secrets");
    child.kill("SIGTERM");
    const { stderr, code } = await output;
    expect(code).toBe(0);
    const shown = JSON.parse(/diverge-proxy options (\{.*\})/.exec(stderr)![1]!);
    expect(shown).toMatchObject({ host: "127.0.0.1", port: 0, programPort: 0, pgPort: 0, appPort: 8123, root: "/tmp/container-root", secretsGate: true, maxMessageBytes: 4096 });
  });

  it("binds every interface by default", async () => {
    const { firstLine, child, output } = run(["--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate"]);
    expect(await firstLine).toMatch(/^diverge-proxy listening: provider ws:\/\/0\.0\.0\.0:\d+/);
    child.kill("SIGTERM");
    const shown = JSON.parse(/diverge-proxy options (\{.*\})/.exec((await output).stderr)![1]!);
    expect(shown).toMatchObject({ host: "0.0.0.0", secretsGate: false });
  });
});
