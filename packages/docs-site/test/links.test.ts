// The link checker: every internal link (href and src) of every page of the generated site resolves
// to a file of the site, every #fragment to an element of its page, every link of the Markdown
// reference to a file, and every page can be reached from the home page.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeEntities, docsDir, fileOfUrl, resolveLink, siteDir, urlOfFile, walk } from "./site.js";

const EXTERNAL = /^[a-z][a-z0-9+.-]*:/i;

function linksOf(html: string): string[] {
  return [...html.matchAll(/\s(?:href|src)="([^"]*)"/g)].map((m) => decodeEntities(m[1]!));
}

function idsOf(html: string): Set<string> {
  return new Set([...html.matchAll(/\sid="([^"]*)"/g)].map((m) => decodeEntities(m[1]!)));
}

describe("the generated site's links", () => {
  const pages = walk(siteDir).filter((f) => f.endsWith(".html"));

  it("has pages to check", () => {
    expect(pages.length).toBeGreaterThan(20);
    expect(existsSync(join(siteDir, "index.html"))).toBe(true);
  });

  it("resolves every internal href and src, fragments included", () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of pages) {
      const html = readFileSync(file, "utf8");
      const at = urlOfFile(file);
      for (const link of linksOf(html)) {
        if (EXTERNAL.test(link)) continue;
        checked++;
        const [path, fragment] = link.split("#", 2) as [string, string | undefined];
        const targetUrl = path === "" ? at : resolveLink(at, path);
        const target = fileOfUrl(targetUrl);
        if (!target) {
          broken.push(`${at}: ${link} → ${targetUrl} (no such file)`);
          continue;
        }
        if (fragment && !idsOf(readFileSync(target, "utf8")).has(fragment)) broken.push(`${at}: ${link} (no element with id "${fragment}")`);
      }
    }
    expect(checked).toBeGreaterThan(1000);
    expect(broken).toEqual([]);
    // Seconds of synchronous work on a quiet machine, 34 s seen beside a CPU-bound neighbour: the bound is a hang guard.
  }, 120_000);

  it("uses no external link and no script", () => {
    for (const file of pages) {
      const html = readFileSync(file, "utf8");
      expect(linksOf(html).filter((l) => EXTERNAL.test(l)), urlOfFile(file)).toEqual([]);
      expect(/<script/i.test(html), urlOfFile(file)).toBe(false);
    }
  });

  it("reaches every page from the home page", () => {
    const seen = new Set<string>(["/"]);
    const queue = ["/"];
    while (queue.length > 0) {
      const at = queue.shift()!;
      const html = readFileSync(fileOfUrl(at)!, "utf8");
      for (const link of linksOf(html)) {
        if (EXTERNAL.test(link)) continue;
        const target = resolveLink(at, link.split("#")[0]!);
        if (!target.endsWith("/") || seen.has(target) || !fileOfUrl(target)) continue;
        seen.add(target);
        queue.push(target);
      }
    }
    const orphans = pages.map(urlOfFile).filter((u) => !seen.has(u));
    expect(orphans).toEqual([]);
  });

  it("keeps the stable paths the docs URL scheme promises", () => {
    const stable = [
      "/",
      "/2.3.0/",
      "/2.3.0/mcp-types/",
      "/2.3.0/proxy/mcp/",
      "/2.3.0/proxy/mcp/list-tools/",
      "/2.3.0/proxy/mcp/list-resources/",
      "/2.3.0/proxy/mcp/call-tool/",
      "/2.3.0/proxy/mcp/read-resource/",
      "/2.3.0/proxy/mcp/notifications/",
      "/2.3.0/container-proxy-endpoints/",
      "/2.3.0/container-proxy-endpoints/frames/",
      "/2.3.0/container-proxy-endpoints/frames/client/",
      "/2.3.0/container-proxy-endpoints/frames/channel-request/client/",
      "/2.3.0/container-proxy-endpoints/tools-begin/channels/",
      "/2.3.0/container-proxy-endpoints/tools-begin/client/channel-request/",
      "/2.3.0/container-proxy-endpoints/tools-begin/client/channel-request/error/",
      "/2.3.0/container-proxy-endpoints/tools-begin/client/postgres/request/",
      "/2.3.0/container-proxy-endpoints/tools-begin/client/mcp-list-tools/request/",
      "/2.3.0/container-proxy-endpoints/proxy/requests/ask/",
      "/2.3.0/container-proxy-endpoints/proxy/requests/mcp-call-tool/ask/",
      "/2.3.0/container-proxy-endpoints/mcp/list-tools/answer/",
      "/2.3.0/container-proxy-endpoints/mcp/list-tools/result/answer/",
      "/2.3.0/container-proxy-endpoints/mcp/answer/error/",
      "/2.3.0/container-proxy-endpoints/postgres/request/",
      "/guide/",
      "/guide/run-a-provider/",
      "/guide/write-a-container-program/",
      "/guide/run-the-proxy/",
      "/guide/use-the-codec/",
      "/guide/run-an-agent-container/",
    ];
    for (const url of stable) {
      expect(fileOfUrl(url), `site page ${url}`).toBeDefined();
      expect(existsSync(join(docsDir, url, "index.md")), `Markdown page ${url}`).toBe(true);
    }
  });

  it("resolves every relative link of the Markdown reference", () => {
    const broken: string[] = [];
    for (const file of walk(docsDir).filter((f) => f.endsWith(".md"))) {
      const text = readFileSync(file, "utf8");
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1]!;
        if (EXTERNAL.test(link) || link.startsWith("#")) continue;
        const target = join(dirname(file), link.split("#")[0]!);
        if (!existsSync(target)) broken.push(`${file.slice(docsDir.length)}: ${link}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("links the guide and the wire reference both ways", () => {
    const guidePages = walk(join(siteDir, "guide")).filter((f) => f.endsWith(".html"));
    expect(guidePages).toHaveLength(6);
    for (const file of guidePages) {
      const at = urlOfFile(file);
      const targets = linksOf(readFileSync(file, "utf8")).map((link) => resolveLink(at, link.split("#")[0]!));
      // Every guide page reaches the reference (at least its home), every page but the index a revision page.
      expect(targets.some((t) => t === "/" || /^\/\d+\.\d+\.\d+\//.test(t)), at).toBe(true);
      if (at !== "/guide/") expect(targets.some((t) => /^\/\d+\.\d+\.\d+\//.test(t)), at).toBe(true);
    }
    for (const at of ["/", "/2.3.0/"]) {
      const targets = linksOf(readFileSync(fileOfUrl(at)!, "utf8")).map((link) => resolveLink(at, link.split("#")[0]!));
      expect(targets, at).toContain("/guide/");
    }
  });
});
