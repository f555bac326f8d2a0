// The site in a real headless browser: Debian's chromium, driven by playwright-core, with JavaScript
// switched off (the site must read without it). Opens the home page and the revision index, the MCP
// exchanges page, follows a link of its tag table, and opens the postgres channel request. A machine
// without /usr/bin/chromium fails this test: it is never skipped.
import { existsSync } from "node:fs";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSite } from "./site.js";

const CHROMIUM = "/usr/bin/chromium";
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

let server: Server;
let origin: string;
let misses: string[];
let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium), as .ci/run does`);
  ({ server, origin, misses } = await serveSite());
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
});

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
});

async function open(path: string): Promise<void> {
  const response = await page.goto(origin + path);
  expect(response?.status(), path).toBe(200);
}

/** The rows of the first table whose header row is exactly `headers`, as cell texts. */
async function tableRows(headers: readonly string[]): Promise<string[][]> {
  return page.evaluate(
    (want) => {
      for (const table of Array.from(document.querySelectorAll("main table"))) {
        const head = Array.from(table.querySelectorAll("thead th")).map((th) => th.textContent?.trim() ?? "");
        if (head.join("|") !== want.join("|")) continue;
        return Array.from(table.querySelectorAll("tbody tr")).map((tr) => Array.from(tr.querySelectorAll("td")).map((td) => td.textContent?.trim() ?? ""));
      }
      return [];
    },
    [...headers],
  );
}

describe("the site in headless chromium", () => {
  it("opens the home page and, from its revision list, the revision index", async () => {
    await open("/");
    await expect(page.locator("h1").textContent()).resolves.toBe("Diverge protocol reference");
    await page.locator("main a", { hasText: "2.3.0" }).first().click();
    await page.waitForURL(`${origin}/2.3.0/`);
    expect(await page.locator("h1").textContent()).toContain("2.3.0");
    expect(await page.locator("nav.revisions a[aria-current]").textContent()).toBe("2.3.0");
    expect(await page.locator("nav.side a", { hasText: "MCP exchanges" }).count()).toBe(1);
    expect(await page.locator("#notation").count()).toBe(1);
    // The stylesheet loaded: the side navigation is laid out beside the content.
    expect(await page.locator("nav.side").evaluate((el) => getComputedStyle(el).borderRightStyle)).toBe("solid");
  });

  it("opens the MCP exchanges page from the navigation and finds the tag table", async () => {
    await page.locator("nav.side a", { hasText: "MCP exchanges" }).click();
    await page.waitForURL(`${origin}/2.3.0/proxy/mcp/`);
    expect(await page.locator("main h1").textContent()).toBe("MCP exchanges");
    const rows = await tableRows(["Kind", "Ask", "Payload", "Answered on", "Answer"]);
    expect(rows).toEqual([
      ["0", "list tools", "the params as JSON", "/mcp/list-tools/{channel}", "exactly one message"],
      ["1", "list resources", "the params as JSON", "/mcp/list-resources/{channel}", "exactly one message"],
      ["2", "call tool", "the params as JSON", "/mcp/call-tool/{channel}", "exactly one message"],
      ["3", "read resource", "the params as JSON", "/mcp/read-resource/{channel}", "exactly one message"],
      ["4", "notifications", "nothing", "/mcp/notifications/{channel}", "one message per notification"],
    ]);
    expect(await page.locator("main li strong", { hasText: "Not served." }).count()).toBe(1);
  });

  it("follows a link of the tag table to the exchange's own page, and back through the breadcrumbs", async () => {
    await page.locator("main table a", { hasText: "/mcp/call-tool/{channel}" }).click();
    await page.waitForURL(`${origin}/2.3.0/proxy/mcp/call-tool/`);
    expect(await page.locator("main h1").textContent()).toBe("Call tool");
    expect(await page.locator("main").textContent()).toContain("[channel: u32, big-endian][2][params: JSON …]");
    const answer = await page.locator("main h2", { hasText: "How the exchange ends" }).count();
    expect(answer).toBe(1);
    await page.locator("main p a", { hasText: "MCP exchanges" }).first().click();
    await page.waitForURL(`${origin}/2.3.0/proxy/mcp/`);
  });

  it("opens the postgres channel request at its stable path and shows the layout and the frame's tags", async () => {
    await open("/2.3.0/container-proxy-endpoints/tools-begin/client/postgres/request/");
    expect(await page.locator("main pre").first().textContent()).toBe("[0][connection_id: u32, big-endian]\n");
    const tags = await tableRows(["Tag", "Variant", "Layout", "What it is"]);
    expect(tags.map((r) => `${r[0]} ${r[1]}`)).toEqual([
      "0 Postgres (this page)",
      "1 Info",
      "2 Daemon",
      "3 McpListTools",
      "4 McpListResources",
      "5 McpCallTool",
      "6 McpReadResource",
      "7 McpNotifications",
      "8 Secrets",
    ]);
    await page.screenshot({ path: join(tmpdir(), "diverge-docs-postgres-request.png"), fullPage: true });
  });

  it("opens the guide from the header, reads a guide page and follows its link into the wire reference and back", async () => {
    await open("/2.3.0/");
    await page.locator("header.top a.guide").click();
    await page.waitForURL(`${origin}/guide/`);
    expect(await page.locator("h1").textContent()).toBe("Guide");
    expect((await tableRows(["Page", "What it covers"])).map((row) => row[0])).toEqual(["Run a provider", "Write a container program", "Run the proxy", "Use the codec", "Run an agent container"]);
    await page.locator("nav.side a", { hasText: "Run a provider" }).click();
    await page.waitForURL(`${origin}/guide/run-a-provider/`);
    expect(await page.locator("h1").textContent()).toBe("Run a provider");
    expect(await page.locator("#nothing-waits-silently").count()).toBe(1);
    expect(await page.locator("main pre code").count()).toBeGreaterThan(3);
    await page.locator("main a", { hasText: "the tools::begin channels" }).click();
    await page.waitForURL(`${origin}/2.3.0/container-proxy-endpoints/tools-begin/channels/`);
    await open("/2.3.0/");
    await page.locator("main a", { hasText: "the guide" }).click();
    await page.waitForURL(`${origin}/guide/`);
  });

  it("asked the server for nothing that is not there", () => {
    expect(misses).toEqual([]);
  });
});
