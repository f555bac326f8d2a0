// What the docs tests share: where the generated site is, a loopback HTTP server for it, and a
// small reader for the HTML that markdown-it writes.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, extname, join, normalize, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const docsDir = join(repoRoot, "docs");
export const siteDir = join(docsDir, "site");

export function walk(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...walk(full));
    else out.push(full);
  }
  return out;
}

/** The site path a file of the site is served at: `…/site/2.3.0/index.html` → `/2.3.0/`. */
export function urlOfFile(file: string): string {
  const rel = relative(siteDir, file).split(sep).join("/");
  return "/" + rel.replace(/(^|\/)index\.html$/, "$1");
}

/** The file a site path names, or undefined when there is none (a folder serves its index.html). */
export function fileOfUrl(path: string): string | undefined {
  const clean = normalize(decodeURIComponent(path)).replace(/^(\.\.[/\\])+/, "");
  let file = join(siteDir, clean);
  if (!file.startsWith(siteDir)) return undefined;
  if (existsSync(file) && statSync(file).isDirectory()) file = join(file, "index.html");
  return existsSync(file) && statSync(file).isFile() ? file : undefined;
}

export function readPage(url: string): string {
  const file = fileOfUrl(url);
  if (!file) throw new Error(`the site has no page at ${url}`);
  return readFileSync(file, "utf8");
}

const TYPES: Record<string, string> = { ".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8" };

/** Serves the site on 127.0.0.1 at a port the system picks; a path with no file answers 404. */
export async function serveSite(): Promise<{ server: Server; origin: string; misses: string[] }> {
  const misses: string[] = [];
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (!path.endsWith("/") && fileOfUrl(path + "/") && !extname(path)) {
      res.writeHead(301, { location: path + "/" }).end();
      return;
    }
    const file = fileOfUrl(path);
    if (!file) {
      misses.push(path);
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(readFileSync(file));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { server, origin: `http://127.0.0.1:${port}`, misses };
}

export function decodeEntities(text: string): string {
  return text
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

/** The text a reader sees in a piece of HTML: tags dropped, entities decoded, spaces collapsed. */
export function textOf(html: string): string {
  return decodeEntities(html.replace(/<br>/g, " ").replace(/<[^>]+>/g, "")).replace(/\s+/g, " ").trim();
}

/** The page's main content, without the navigation around it. */
export function mainOf(html: string): string {
  const m = /<main>([\s\S]*)<\/main>/.exec(html);
  if (!m) throw new Error("page has no <main>");
  return m[1]!;
}

export interface Cell {
  readonly html: string;
  readonly text: string;
  readonly hrefs: readonly string[];
}

/** Every table of a piece of HTML, as header texts and rows of cells. */
export function tablesOf(html: string): { headers: string[]; rows: Cell[][] }[] {
  const out: { headers: string[]; rows: Cell[][] }[] = [];
  for (const t of html.matchAll(/<table>([\s\S]*?)<\/table>/g)) {
    const headers = [...t[1]!.matchAll(/<th[^>]*>([\s\S]*?)<\/th>/g)].map((m) => textOf(m[1]!));
    const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(t[1]!)?.[1] ?? "";
    const rows = [...body.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((r) =>
      [...r[1]!.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((c) => ({
        html: c[1]!,
        text: textOf(c[1]!),
        hrefs: [...c[1]!.matchAll(/href="([^"]*)"/g)].map((h) => decodeEntities(h[1]!)),
      })),
    );
    out.push({ headers, rows });
  }
  return out;
}

/** A link of a page, resolved against the page's own path. */
export function resolveLink(pageUrl: string, href: string): string {
  return new URL(href, `http://site${pageUrl}`).pathname;
}
