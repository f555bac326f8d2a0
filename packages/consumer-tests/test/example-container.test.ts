// @diverge/example-container from its tarball (issue 26 §4): the guide's "try a container in one
// command" run as written (npx with the installed packages, the proxy in front of the program), then
// begun and called by the guide's own provider command; and its binary alone, needing nothing beside it.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { cleanEnv } from "./global-setup.js";
import { workspacePath } from "./packages.js";

const { project } = inject("consumer");
const children: ChildProcess[] = [];
afterAll(() => {
  // Each was started in a process group of its own: the shell, the program and the proxy go together.
  for (const child of children) if (child.exitCode === null && child.pid) process.kill(-child.pid, "SIGKILL");
});

/** The guide's sh block lines that start with `needle`. */
function guideLine(needle: RegExp): string {
  const text = readFileSync(workspacePath("docs-src", "guide", "write-a-container-program.md"), "utf8");
  const line = text.split("\n").find((l) => needle.test(l));
  expect(line, `the guide's line matching ${needle}`).toBeDefined();
  return line!;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts `sh -c line` in its own process group; `line(re)` resolves with the first output line matching. */
function startShell(script: string, env: Record<string, string>): { line(pattern: RegExp): Promise<string>; output(): string } {
  const child = spawn("sh", ["-c", script], { cwd: project, env: { ...cleanEnv(), ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
  children.push(child);
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  return {
    output: () => output,
    async line(pattern) {
      // A hang guard, not a timing assertion: the packages are installed, nothing is fetched.
      const deadline = Date.now() + 120_000;
      for (;;) {
        const found = output.split("\n").find((l) => pattern.test(l));
        if (found) return found;
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`never printed ${pattern}:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
  };
}

describe("@diverge/example-container, installed from its tarball", () => {
  it("is the guide's one command: the program with a proxy in front, begun and called by the guide's provider command", async () => {
    const oneCommand = guideLine(/^npx .*-p @diverge\/example-container/);
    const providerCommand = guideLine(/diverge tools call greet/);
    // The guide's lines as written, but on free ports (other tests run beside this one): the
    // program's port through $PORT, which both read, and 0 for the proxy's own.
    const appPort = await freePort();
    const script = oneCommand.replace("exec diverge-proxy ", "exec diverge-proxy --port 0 --program-port 0 --pg-port 0 ");
    expect(script).not.toBe(oneCommand);
    const container = startShell(script, { PORT: String(appPort) });
    await container.line(/example container listening on http:\/\/127\.0\.0\.1:\d+/);
    const listening = await container.line(/provider ws:\/\/127\.0\.0\.1:(\d+)/);
    const proxyPort = /provider ws:\/\/127\.0\.0\.1:(\d+)/.exec(listening)![1]!;
    // The proxy fronts the program on $PORT, with the installed package as its container root.
    const options = await container.line(/diverge-proxy options /);
    expect(options).toContain(`"appPort":${appPort}`);
    expect(options).toContain(`"root":"${join(project, "node_modules", "@diverge", "example-container")}"`);

    // `API_KEY=demo npx -y -p @diverge/client diverge tools call …`, at this proxy.
    const called = spawnSync("sh", ["-c", `${providerCommand} --proxy ws://127.0.0.1:${proxyPort}`], { cwd: project, env: cleanEnv(), encoding: "utf8", timeout: 120_000 });
    expect({ status: called.status, stderr: called.stderr }).toEqual({ status: 0, stderr: "" });
    expect(JSON.parse(called.stdout)).toEqual({ content: [{ type: "text", text: "Hello, Ada!" }] });
  });

  it("runs alone as `npx @diverge/example-container`: /register declares the greeter, /secrets needs API_KEY", async () => {
    const port = await freePort();
    const program = startShell(`exec npx @diverge/example-container --port ${port}`, {});
    await program.line(new RegExp(`example container listening on http://127\\.0\\.0\\.1:${port}`));
    const post = (path: string, body: unknown) => fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const registered = await post("/register", { greeting: "Hi" });
    expect(registered.status).toBe(200);
    expect(((await registered.json()) as { name: string }[]).map((tool) => tool.name)).toEqual(["greeter"]);
    const refused = await post("/secrets", {});
    expect(refused.status).toBe(422);
    expect(await refused.json()).toEqual({ error: "missing secrets", missing: ["API_KEY"] });
    // --root names the installed package, which holds the DIVERGE.md it ships.
    const root = spawnSync(join(project, "node_modules", ".bin", "diverge-example-container"), ["--root"], { cwd: project, env: cleanEnv(), encoding: "utf8" });
    expect(root.stdout.trim()).toBe(join(project, "node_modules", "@diverge", "example-container"));
    expect(readFileSync(join(root.stdout.trim(), "DIVERGE.md"), "utf8")).toMatch(/^---\ntitle: Greeter\n/);
  });
});
