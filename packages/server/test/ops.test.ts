// `diverge-proxy --log-format json --health <host:port>`: the real CLI, a real provider (the built
// @diverge/client) and the example container; /healthz and /metrics by real HTTP requests.
import { spawn, type ChildProcess } from "node:child_process";
import { get as httpGet } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { eventOf, jsonLogLine, parseOpsAddress } from "@diverge/multiplexer/ops";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const cli = join(packageDir, "dist", "cli.js");
const clientEntry = join(packageDir, "..", "client", "dist", "index.js");
const SECRET = "sup3r-s3cret-value-6f1d";

interface Connection {
  beginTools(args: unknown): Promise<unknown[]>;
  feedSecrets(secrets: Record<string, string>): Promise<void>;
  mcp: { callTool(params: unknown): Promise<unknown> };
  close(): void;
}

const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
});

/** The lines of `text` as JSON objects; fails on any line that is not one. */
function objects(text: string): Record<string, unknown>[] {
  return text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${line}`);
      }
    });
}

async function get(url: string): Promise<{ status: number; type: string; body: string }> {
  const response = await fetch(url);
  return { status: response.status, type: response.headers.get("content-type") ?? "", body: await response.text() };
}

/** The value of a sample line `name{labels} value` in Prometheus text. */
function sample(text: string, name: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l === name);
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

describe("the JSON log's lines", () => {
  it("are time, level, event, the ids named and the message, with secrets redacted", () => {
    const line = JSON.parse(jsonLogLine("info", `/ postgres connection 7: announced with ${SECRET}`, [SECRET])) as Record<string, unknown>;
    expect(Object.keys(line)).toEqual(["time", "level", "event", "connection", "message"]);
    expect(new Date(line.time as string).toISOString()).toBe(line.time);
    expect(line).toMatchObject({ level: "info", event: "postgres.connection", connection: 7, message: "/ postgres connection 7: announced with [redacted]" });
    expect(eventOf("diverge-proxy options {\"a\":1}")).toBe("diverge-proxy.options");
    expect(parseOpsAddress("[::1]:9464")).toEqual({ host: "::1", port: 9464 });
    expect(parseOpsAddress("0.0.0.0:99999")).toBeUndefined();
  });
});

describe("diverge-proxy --log-format json --health 127.0.0.1:0", () => {
  it("logs JSON lines only, never a secret; /healthz says what is connected and begun; /metrics counts", { timeout: 120_000 }, async () => {
    const container = await startExampleContainer({ host: "127.0.0.1" });
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", String(container.port), "--root", exampleRoot, "--log-format", "json", "--health", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    const healthAt = new Promise<string>((resolve) => {
      child.stderr!.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
        const found = /health and metrics at (http:\/\/[^/\s"]+)\/healthz/.exec(stderr);
        if (found) resolve(found[1]!);
      });
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    let connection: Connection | undefined;
    try {
      const base = await healthAt;
      await new Promise<void>((resolve) => {
        const check = () => (stdout.includes("\n") ? resolve() : setTimeout(check, 20));
        check();
      });
      const port = Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(stdout)![1]);
      // 503 while the proxy loads (the ports bound), 200 once it serves: polled as an orchestrator would.
      let before = await get(`${base}/healthz`);
      for (const deadline = Date.now() + 60_000; before.status === 503 && Date.now() < deadline; ) {
        expect(JSON.parse(before.body)).toMatchObject({ ready: false, status: "starting" });
        await new Promise((r) => setTimeout(r, 25));
        before = await get(`${base}/healthz`);
      }
      // Serving, nobody connected yet.
      expect(before.status).toBe(200);
      expect(before.type).toBe("application/json");
      expect(JSON.parse(before.body)).toMatchObject({ ready: true, status: "serving", provider: { multiplexed: "none", begun: false, requests: "none" }, program: { secretsTaken: false } });
      const metricsBefore = await get(`${base}/metrics`);
      expect(metricsBefore.type).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(sample(metricsBefore.body, "diverge_proxy_begun")).toBe(0);
      expect(metricsBefore.body).toContain("# TYPE diverge_proxy_refused_asks_total counter");
      expect(metricsBefore.body).toContain("# TYPE diverge_proxy_pending_asks gauge");

      const client = (await import(pathToFileURL(clientEntry).href)) as { openContainer(url: string): Promise<Connection> };
      connection = await client.openContainer(`ws://127.0.0.1:${port}/`);
      expect((await connection.beginTools({ arguments: { greeting: "Hi" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } })).length).toBeGreaterThan(0);
      await connection.feedSecrets({ API_KEY: SECRET });
      await connection.mcp.callTool({ name: "greet", arguments: { name: SECRET } });
      const after = JSON.parse((await get(`${base}/healthz`)).body) as Record<string, unknown>;
      expect(after).toMatchObject({ ready: true, provider: { multiplexed: "open", begun: true } });
      const metricsAfter = (await get(`${base}/metrics`)).body;
      expect(sample(metricsAfter, "diverge_proxy_begun")).toBe(1);
      expect(sample(metricsAfter, "diverge_proxy_ready")).toBe(1);
      expect((await get(`${base}/nothing`)).status).toBe(404);
    } finally {
      connection?.close();
      await new Promise((r) => setTimeout(r, 200));
      child.kill("SIGTERM");
      await container.close();
    }
    expect(await exited).toBe(0);
    const lines = objects(stderr);
    expect(lines.length).toBeGreaterThan(2);
    for (const line of lines) {
      expect(typeof line.time).toBe("string");
      expect(["info", "error"]).toContain(line.level);
      expect(typeof line.event).toBe("string");
      expect(typeof line.message).toBe("string");
    }
    expect(lines.some((line) => line.event === "provider.connection.ended")).toBe(true);
    // The secret went through the proxy twice (fed, and as a tool's argument): never written.
    expect(stderr).not.toContain(SECRET);
    expect(stdout).not.toContain(SECRET);
  });

  it("refuses a bad --health or --log-format with the usage", async () => {
    for (const [flag, value] of [["--health", "nowhere"], ["--log-format", "xml"]] as const) {
      const child = spawn(process.execPath, [cli, flag, value], { stdio: ["ignore", "pipe", "pipe"] });
      let stderr = "";
      child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      expect(await new Promise((resolve) => child.once("exit", resolve))).toBe(2);
      expect(stderr.split("\n")[0]).toContain(flag);
    }
  });

  it("--allow-health-host widens the Host names --health accepts (a scraper's service name); without --health it is a usage error", async () => {
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", "9", "--root", exampleRoot, "--health", "127.0.0.1:0", "--allow-health-host", "scraper.monitoring.svc"], { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    let stderr = "";
    const base = await new Promise<string>((resolve, reject) => {
      child.stderr!.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
        const found = /health and metrics at (http:\/\/[^/\s"]+)\/healthz/.exec(stderr);
        if (found) resolve(found[1]!);
      });
      child.once("exit", (code) => reject(new Error(`the proxy exited (${code}): ${stderr}`)));
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
    expect(await statusWithHost(`127.0.0.1:${port}`)).not.toBe(403);
    expect(await statusWithHost(`elsewhere.example:${port}`)).toBe(403);
    child.kill("SIGTERM");

    const alone = spawn(process.execPath, [cli, "--allow-health-host", "scraper.monitoring.svc"], { stdio: ["ignore", "pipe", "pipe"] });
    let aloneErr = "";
    alone.stderr!.on("data", (chunk: Buffer) => (aloneErr += chunk.toString()));
    expect(await new Promise((resolve) => alone.once("exit", resolve))).toBe(2);
    expect(aloneErr.split("\n")[0]).toContain("--allow-health-host widens --health");
  });
});
