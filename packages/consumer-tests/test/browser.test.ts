// @diverge/codec in a real browser: the consumer's page script (project/vectors.mjs, the same code the
// Node check runs) is bundled by esbuild for platform "browser" from the installed tarballs, with any
// Node built-in an error, then served on loopback and run in headless Chromium. It must decode and
// encode every seed vector. No Chromium means a failure, not a skip.
import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, join } from "node:path";
import { build, stop } from "esbuild";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { noNodeBuiltins } from "../scripts/no-node-builtins.mjs";
import { workspacePath } from "./packages.js";

const chromiumPath = "/usr/bin/chromium";
const { project } = inject("consumer");
const vectorsFile = join(project, "node_modules", "@diverge", "conformance", "vectors", "2.3.0.jsonl");

interface Report {
  total: number;
  passed: number;
  decoded: number;
  encoded: number;
  failed: number;
  failures: { name: string; problem: string }[];
}

let server: Server;
let browser: Browser | undefined;
let origin: string;
let bundle: string;

beforeAll(async () => {
  const result = await build({
    absWorkingDir: project,
    entryPoints: ["browser-entry.mjs"],
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2022",
    write: false,
    logLevel: "silent",
    plugins: [noNodeBuiltins()],
  });
  bundle = result.outputFiles[0]!.text;

  const files: Record<string, () => string> = {
    "/": () => readFileSync(join(project, "index.html"), "utf8"),
    "/index.html": () => readFileSync(join(project, "index.html"), "utf8"),
    "/bundle.js": () => bundle,
    "/vectors.jsonl": () => readFileSync(vectorsFile, "utf8"),
  };
  const types: Record<string, string> = { ".html": "text/html", ".js": "text/javascript", ".jsonl": "application/jsonl" };
  server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    const file = files[path];
    if (!file) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "content-type": `${types[extname(path)] ?? "text/html"}; charset=utf-8`, "cache-control": "no-store" }).end(file());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await browser?.close();
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  // esbuild's service process would otherwise keep this worker alive.
  await stop();
});

describe("@diverge/codec in headless Chromium", () => {
  it("bundles for the browser without any Node built-in", () => {
    expect(bundle.length).toBeGreaterThan(0);
    expect(bundle).not.toMatch(/\brequire\(["'](node:)?(fs|path|buffer|crypto|stream|net|os)["']\)/);
  });

  it("decodes and encodes every seed vector in the page", async () => {
    expect(existsSync(chromiumPath), `${chromiumPath} is missing: apt-get install -y chromium`).toBe(true);
    browser = await chromium.launch({
      executablePath: chromiumPath,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    await page.goto(`${origin}/index.html`);
    await page.waitForFunction(() => "dvReport" in globalThis, undefined, { timeout: 60_000 });
    const report = (await page.evaluate(() => (globalThis as unknown as { dvReport: unknown }).dvReport)) as Report;
    const shown = await page.textContent("#result");

    const lines = readFileSync(workspacePath("packages", "conformance", "vectors", "2.3.0.jsonl"), "utf8").trim().split("\n");
    expect(errors).toEqual([]);
    expect(report.failures).toEqual([]);
    expect(report.total).toBe(lines.length);
    expect(report.passed).toBe(lines.length);
    expect(report.decoded).toBeGreaterThan(0);
    expect(report.encoded).toBeGreaterThan(0);
    expect(shown).toBe(`${lines.length} passed, 0 failed`);
  });
});
