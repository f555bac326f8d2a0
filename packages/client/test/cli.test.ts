// The `diverge` command line as a consumer meets it: a missing secret is named before the run waits,
// every wait is bounded by --timeout, and `diverge answer` stops quietly on SIGTERM.
import { execFile, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const run = promisify(execFile);
let app: ExampleContainer;
const proxies: RunningProxy[] = [];

beforeAll(async () => {
  app = await startExampleContainer();
});
afterAll(async () => {
  await app.close();
});
afterEach(async () => {
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

async function proxy(): Promise<RunningProxy> {
  const running = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, log: () => {} });
  proxies.push(running);
  return running;
}

describe("diverge tools", () => {
  it("names the --secret DIVERGE.md declares and nobody gave before it waits, and gives up after --timeout", { timeout: 120_000 }, async () => {
    const running = await proxy();
    // The message naming the 5000 ms is the proof (long enough that the warning, which needs DIVERGE.md read first, comes before it under load) it gave up after --timeout (no measured time: a loaded machine is slow, not wrong).
    const failure = await run("node", [cli, "tools", "list", "--proxy", `http://127.0.0.1:${running.port}`, "--arguments", '{"greeting":"Hey"}', "--timeout", "5000"]).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure?.code).toBe(8);
    const [warning, timedOut] = failure!.stderr.trim().split("\n");
    expect(warning).toContain("declares the secret API_KEY, not given: add --secret API_KEY=");
    expect(timedOut).toContain("tools/list: no answer within 5000 ms");
    expect(timedOut).toContain("secrets gate");
  });

  it("says why a second run against the same proxy is refused", { timeout: 120_000 }, async () => {
    const running = await proxy();
    const common = ["--proxy", `ws://127.0.0.1:${running.port}`, "--arguments", '{"greeting":"Hey"}', "--secret", "API_KEY=k"];
    await run("node", [cli, "tools", "list", ...common]);
    const second = await run("node", [cli, "tools", "list", ...common]).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(second?.code).toBe(4);
    expect(second?.stderr).toContain("the proxy's one multiplexed connection");
    expect(second?.stderr).toContain("is already used");
  });
});

describe("diverge answer", () => {
  it("on SIGTERM prints stopping and never dialling again after it", { timeout: 120_000 }, async () => {
    const running = await proxy();
    const child = spawn("node", [cli, "answer", "--proxy", `ws://127.0.0.1:${running.port}`, "--mcp", "http://127.0.0.1:9/mcp"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const deadline = Date.now() + 90_000;
    while (!stderr.includes("connected to") && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    const after = stderr.slice(stderr.indexOf("stopping"));
    expect(stderr).toContain("stopping");
    expect(after).not.toContain("dialling again");
  });
});
