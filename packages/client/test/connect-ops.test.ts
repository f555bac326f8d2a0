// `diverge connect --log-format json --health 127.0.0.1:0`: the real CLI (dist/cli.js) holding a real
// proxy beside the example container; /healthz and /metrics by real HTTP requests; the secret given
// with --secret-env never written.
import { spawn } from "node:child_process";
import { get as httpGet } from "node:http";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const SECRET = "connect-s3cret-9a7e";

async function get(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.text() };
}
const sample = (text: string, name: string) => {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(" ").pop());
};

describe.each(["multiplexed", "paths"] as const)("diverge connect --transport %s --log-format json --health", (transport) => {
  it("answers /healthz (503, then 200 once held) and /metrics; every stderr line is JSON; the secret never appears", { timeout: 120_000 }, async () => {
    const app = await startExampleContainer();
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
    const secretFlags = transport === "multiplexed" ? ["--secret-env", "API_KEY", "--arguments", `{"greeting":"${SECRET}"}`] : [];
    const child = spawn(process.execPath, [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, ...secretFlags, "--log-format", "json", "--health", "127.0.0.1:0"], {
      env: { ...process.env, API_KEY: SECRET },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    const healthAt = new Promise<string>((resolve, reject) => {
      child.stderr!.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
        const found = /health and metrics at (http:\/\/[^/\s"]+)\/healthz/.exec(stderr);
        if (found) resolve(found[1]!);
      });
      child.once("exit", (code) => reject(new Error(`diverge connect exited with ${code}: ${stderr}`)));
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    try {
      const base = await healthAt;
      // 503 until the proxy is held: polled (a loaded machine takes seconds), with a hang guard.
      let health = await get(`${base}/healthz`);
      for (const deadline = Date.now() + 60_000; health.status === 503 && Date.now() < deadline; ) {
        await new Promise((r) => setTimeout(r, 25));
        health = await get(`${base}/healthz`);
      }
      expect(health.status).toBe(200);
      const body = JSON.parse(health.body) as Record<string, unknown>;
      expect(body).toMatchObject({ ready: true, status: "held", transport });
      if (transport === "multiplexed") expect(body).toMatchObject({ multiplexed: "open", begun: true });
      else expect(body).toMatchObject({ requests: "open" });
      const metrics = await get(`${base}/metrics`);
      expect(metrics.status).toBe(200);
      expect(sample(metrics.body, "diverge_connect_ready")).toBe(1);
      expect(sample(metrics.body, "diverge_connect_begun")).toBe(transport === "multiplexed" ? 1 : 0);
      expect(metrics.body).toContain("# TYPE diverge_connect_asks_total counter");
      if (transport === "paths") expect(sample(metrics.body, "diverge_connect_requests_opened_total")).toBeGreaterThanOrEqual(1);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    await proxy.close();
    await app.close();
    const lines = stderr.split("\n").filter((line) => line.length > 0);
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) {
      const object = JSON.parse(line) as Record<string, unknown>;
      expect(Object.keys(object).slice(0, 3)).toEqual(["time", "level", "event"]);
      expect(typeof object.message).toBe("string");
    }
    expect(stderr).not.toContain(SECRET);
  });
});

describe("diverge connect --allow-health-host", () => {
  it("widens the Host names --health accepts (a scraper's service name); without --health it is a usage error", async () => {
    const app = await startExampleContainer();
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
    const child = spawn(process.execPath, [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", "paths", "--health", "127.0.0.1:0", "--allow-health-host", "scraper.monitoring.svc"], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    try {
      const base = await new Promise<string>((resolve, reject) => {
        child.stderr!.on("data", (chunk: Buffer) => {
          stderr += chunk.toString();
          const found = /health and metrics at (http:\/\/[^/\s"]+)\/healthz/.exec(stderr);
          if (found) resolve(found[1]!);
        });
        child.once("exit", (code) => reject(new Error(`diverge connect exited with ${code}: ${stderr}`)));
      });
      const port = Number(new URL(base).port);
      const statusWithHost = (host: string) =>
        new Promise<number>((resolve, reject) => {
          httpGet({ host: "127.0.0.1", port, path: "/healthz", headers: { host } }, (response) => {
            response.resume();
            resolve(response.statusCode!);
          }).once("error", reject);
        });
      expect(await statusWithHost(`scraper.monitoring.svc:${port}`)).not.toBe(403);
      expect(await statusWithHost(`elsewhere.example:${port}`)).toBe(403);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    await proxy.close();
    await app.close();

    const alone = spawn(process.execPath, [cli, "connect", "--proxy", "ws://127.0.0.1:9", "--allow-health-host", "scraper.monitoring.svc"], { stdio: ["ignore", "pipe", "pipe"] });
    let aloneErr = "";
    alone.stderr!.on("data", (chunk: Buffer) => (aloneErr += chunk.toString()));
    expect(await new Promise((resolve) => alone.once("exit", resolve))).toBe(2);
    expect(aloneErr).toContain("--allow-health-host widens --health");
  });
});
