// The static HTML site, rendered from the very Markdown of docs/<revision>/ by markdown-it: one
// index.html per page under docs/site/, relative links only (the site works under any base path and
// from a plain file server), a revision menu, the revision's navigation, one stylesheet, no script.
import MarkdownIt, { type MarkdownIt as MarkdownItType } from "markdown-it";
import type { IrRevision } from "../ir.js";
import { docsUrl, slug } from "./docs-url.js";
import type { GeneratedFile } from "./project.js";

export interface SitePage {
  /** The page's site path, e.g. `/2.3.0/proxy/mcp/`. */
  readonly url: string;
  /** The revision the page belongs to; none for the site's home. */
  readonly revision?: string;
  readonly title: string;
  /** The page's Markdown, without the generated-file banner. */
  readonly markdown: string;
  /** Where the revision's navigation lists the page; a page without one is reached by links. */
  readonly nav?: { readonly section: "overview" | "exchanges" | "channels" | "frames" | "errors" | "types" | "guide"; readonly sub?: boolean };
}

export const SITE_DIR = "docs/site";
const STYLE = "/style.css";
const ICON = "/favicon.svg";

function markdownRenderer(): MarkdownItType {
  const md = new MarkdownIt({ html: false, linkify: false, typographer: false });
  // Heading anchors, as GitHub gives them, so that `#notation` works in the repository and on the site.
  md.core.ruler.push("heading_ids", (state) => {
    const used = new Map<string, number>();
    const tokens = state.tokens;
    for (let i = 0; i < tokens.length; i++) {
      const token = tokens[i]!;
      if (token.type !== "heading_open") continue;
      const inline = tokens[i + 1]!;
      const text = (inline.children ?? []).filter((c) => c.type === "text" || c.type === "code_inline").map((c) => c.content).join("");
      const base = slug(text);
      const n = used.get(base) ?? 0;
      used.set(base, n + 1);
      token.attrSet("id", n === 0 ? base : `${base}-${n}`);
    }
  });
  // Links between pages point at index.md in the Markdown; on the site they point at the folder.
  const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
  md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
    const token = tokens[idx]!;
    const target = String(token.attrGet("href") ?? "");
    if (target && !/^[a-z]+:/i.test(target)) {
      const m = /^((?:[^#?]*\/)?)index\.md(#.*)?$/.exec(target);
      if (m) token.attrSet("href", `${m[1] || "./"}${m[2] ?? ""}`);
    }
    return defaultLinkOpen(tokens, idx, options, env, self);
  };
  // A `<br>` written in a table cell is the one piece of HTML the Markdown uses.
  const defaultText = md.renderer.rules.text!;
  md.renderer.rules.text = (tokens, idx, options, env, self) => String(defaultText(tokens, idx, options, env, self)).replace(/&lt;br&gt;/g, "<br>");
  return md;
}

const HTML_SPECIAL = /[&<>"]/;

function escapeHtml(text: string): string {
  if (!HTML_SPECIAL.test(text)) return text;
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

export function renderSite(pages: readonly SitePage[], revisions: readonly IrRevision[], bannerOf: (ir: IrRevision) => string, newest: IrRevision): GeneratedFile[] {
  const md = markdownRenderer();
  const urls = new Set(pages.map((p) => p.url));
  const files: GeneratedFile[] = [];
  // Every page of a revision carries that revision's whole navigation: its entries are worked out
  // once per revision, and each page only links them from where it is.
  const navs = new Map<string, NavSection[]>();
  const targets = new Map<string, LinkTarget>();
  for (const p of pages) {
    const ir = revisions.find((r) => r.revision === p.revision) ?? newest;
    const html = md.render(p.markdown);
    let nav = p.revision === undefined ? undefined : navs.get(p.revision);
    if (p.revision !== undefined && nav === undefined) navs.set(p.revision, (nav = navSections(p.revision, pages)));
    files.push({ path: `${SITE_DIR}${p.url}index.html`, text: layout(p, html, pages, revisions, urls, bannerOf(ir), nav, targets) });
  }
  files.push({ path: `${SITE_DIR}${STYLE}`, text: `/* ${bannerOf(newest).replace(/^<!-- | -->\n$/g, "")} */\n${CSS}` });
  files.push({
    path: `${SITE_DIR}${ICON}`,
    text: `${bannerOf(newest)}<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#0b5cad"/><path d="M4 3h4a5 5 0 0 1 0 10H4z" fill="#fff"/></svg>\n`,
  });
  return files;
}

/** A page's site path in segments, and the HTML-escaped link text from each depth of a shared prefix on. */
interface LinkTarget {
  readonly segments: readonly string[];
  readonly escaped: readonly string[];
  readonly suffixes: (string | undefined)[];
}

/**
 * `escapeHtml(relativeUrl(from, to))` for every `to`, from one `from`: the same text, with each
 * target's segments split and escaped once (`targets` is shared by every page of the site).
 */
function linker(from: string, targets: Map<string, LinkTarget>): (to: string) => string {
  const a = from.split("/").filter(Boolean);
  return (to) => {
    let t = targets.get(to);
    if (t === undefined) {
      const segments = to.split("/").filter(Boolean);
      targets.set(to, (t = { segments, escaped: segments.map(escapeHtml), suffixes: [] }));
    }
    const b = t.segments;
    let common = 0;
    while (common < a.length && common < b.length && a[common] === b[common]) common++;
    let suffix = t.suffixes[common];
    if (suffix === undefined) suffix = t.suffixes[common] = t.escaped.slice(common).map((segment) => `${segment}/`).join("");
    const rel = "../".repeat(a.length - common) + suffix;
    return rel === "" ? "./" : rel;
  };
}

function layout(p: SitePage, body: string, pages: readonly SitePage[], revisions: readonly IrRevision[], urls: Set<string>, bannerLine: string, navOfRevision: readonly NavSection[] | undefined, targets: Map<string, LinkTarget>): string {
  const at = p.url;
  const link = linker(at, targets);
  const current = (to: string) => (to === at ? ' aria-current="page"' : "");

  // The revision menu: the same page in every revision that has it, else that revision's index.
  const revisionItems = [...revisions].reverse().map((ir) => {
    const same = p.revision ? at.replace(`/${p.revision}/`, `/${ir.revision}/`) : docsUrl({ kind: "revision", revision: ir.revision });
    const to = urls.has(same) ? same : docsUrl({ kind: "revision", revision: ir.revision });
    const mark = ir.revision === p.revision ? ' aria-current="true"' : "";
    return `<li><a href="${link(to)}"${mark}>${escapeHtml(ir.revision)}</a></li>`;
  });

  const nav = p.revision ? revisionNav(p.revision, navOfRevision!, at, link) : p.nav?.section === "guide" ? guideNav(pages, link, current) : "";
  const title = p.revision ? `${p.title} · Diverge ${p.revision}` : p.title;
  return [
    bannerLine.trimEnd(),
    "<!DOCTYPE html>",
    '<html lang="en">',
    "<head>",
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title>`,
    `<link rel="stylesheet" href="${link("/")}${STYLE.slice(1)}">`,
    `<link rel="icon" href="${link("/")}${ICON.slice(1)}" type="image/svg+xml">`,
    "</head>",
    "<body>",
    '<header class="top">',
    `<a class="brand" href="${link("/")}">Diverge protocol reference</a>`,
    urls.has("/guide/") ? `<a class="guide" href="${link("/guide/")}"${current("/guide/")}>Guide</a>` : "",
    `<nav class="revisions" aria-label="Revision"><span>Revision</span><ul>${revisionItems.join("")}</ul></nav>`,
    "</header>",
    '<div class="frame">',
    nav,
    `<main>\n${body}</main>`,
    "</div>",
    `<footer>Generated from the spec by the diverge-ts spec compiler. Every page has a Markdown twin in the repository, under docs${escapeHtml(at)}index.md.</footer>`,
    "</body>",
    "</html>",
    "",
  ]
    .filter((line) => line !== "")
    .join("\n")
    .concat("\n");
}

/** One section of a revision's navigation: its heading's HTML and its entries, each split around its link. */
interface NavSection {
  readonly head: string;
  readonly items: readonly { readonly url: string; readonly open: string; readonly close: string }[];
}

/** The sections of a revision's navigation, in order; sections without pages are left out. */
function navSections(revision: string, pages: readonly SitePage[]): NavSection[] {
  const mine = pages.filter((p) => p.revision === revision && p.nav);
  const sections: [string, string][] = [
    ["overview", ""],
    ["exchanges", "Exchanges"],
    ["channels", "Channels"],
    ["frames", "Frames"],
    ["errors", "Errors"],
    ["types", "Types"],
  ];
  const out: NavSection[] = [];
  for (const [section, heading] of sections) {
    const list = mine.filter((p) => p.nav!.section === section);
    if (list.length === 0) continue;
    const items = list.map((p) => ({ url: p.url, open: `<li${p.nav!.sub ? ' class="sub"' : ""}><a href="`, close: `>${escapeHtml(section === "overview" ? "Overview" : p.title)}</a></li>` }));
    out.push({ head: heading ? `<h2>${heading}</h2>` : "", items });
  }
  return out;
}

/** A revision's navigation as seen from the page at `at`: links relative to it, its own entry marked. */
function revisionNav(revision: string, sections: readonly NavSection[], at: string, link: (to: string) => string): string {
  const out: string[] = [`<nav class="side" aria-label="Pages of revision ${escapeHtml(revision)}">`];
  for (const { head, items } of sections) {
    let list = "";
    for (const item of items) list += `${item.open}${link(item.url)}"${item.url === at ? ' aria-current="page"' : ""}${item.close}`;
    out.push(`${head}<ul>${list}</ul>`);
  }
  out.push("</nav>");
  return out.join("\n");
}

/** The guide's own navigation: its index and its pages, in reading order. */
function guideNav(pages: readonly SitePage[], link: (to: string) => string, current: (to: string) => string): string {
  const items = pages
    .filter((p) => p.nav?.section === "guide")
    .map((p) => `<li${p.url === "/guide/" ? "" : ' class="sub"'}><a href="${link(p.url)}"${current(p.url)}>${escapeHtml(p.title)}</a></li>`);
  return [`<nav class="side" aria-label="Guide">`, `<h2>Guide</h2><ul>${items.join("")}</ul>`, "</nav>"].join("\n");
}

const CSS = `:root {
  --ink: #1d232b;
  --muted: #5b6572;
  --line: #d8dee6;
  --paper: #ffffff;
  --tint: #f4f6f9;
  --accent: #0b5cad;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif;
  font-size: 16px;
  line-height: 1.55;
  color: var(--ink);
  background: var(--paper);
}
body { margin: 0; }
a { color: var(--accent); }
a[aria-current="page"] { font-weight: 600; color: var(--ink); text-decoration: none; }
header.top {
  display: flex; flex-wrap: wrap; align-items: center; justify-content: space-between; gap: 0.5rem 1.5rem;
  padding: 0.7rem 1.5rem; border-bottom: 1px solid var(--line); background: var(--tint);
}
header.top .brand { font-weight: 700; color: var(--ink); text-decoration: none; }
nav.revisions { display: flex; align-items: center; gap: 0.5rem; font-size: 0.9rem; }
nav.revisions span { color: var(--muted); }
nav.revisions ul { display: flex; gap: 0.4rem; margin: 0; padding: 0; list-style: none; }
nav.revisions a { display: inline-block; padding: 0.1rem 0.55rem; border: 1px solid var(--line); border-radius: 999px; text-decoration: none; background: var(--paper); }
nav.revisions a[aria-current="true"] { background: var(--accent); border-color: var(--accent); color: #fff; }
.frame { display: flex; align-items: flex-start; }
nav.side {
  flex: 0 0 17rem; box-sizing: border-box; padding: 1rem 1rem 2rem 1.5rem; font-size: 0.88rem;
  border-right: 1px solid var(--line); position: sticky; top: 0; max-height: 100vh; overflow-y: auto;
}
nav.side h2 { font-size: 0.75rem; text-transform: uppercase; letter-spacing: 0.06em; color: var(--muted); margin: 1.1rem 0 0.3rem; }
nav.side ul { list-style: none; margin: 0; padding: 0; }
nav.side li { margin: 0.15rem 0; }
nav.side li.sub { padding-left: 0.9rem; }
nav.side a { text-decoration: none; }
nav.side a:hover { text-decoration: underline; }
main { flex: 1 1 auto; min-width: 0; max-width: 62rem; padding: 1.2rem 2rem 3rem; }
main h1 { font-size: 1.7rem; line-height: 1.25; margin: 0.4rem 0 0.8rem; }
main h2 { font-size: 1.3rem; margin-top: 2rem; padding-bottom: 0.2rem; border-bottom: 1px solid var(--line); }
main h3 { font-size: 1.08rem; margin-top: 1.5rem; }
main blockquote { margin: 0 0 1rem; padding: 0.5rem 1rem; border-left: 4px solid var(--accent); background: var(--tint); color: var(--ink); }
main blockquote p { margin: 0; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 0.88em; background: var(--tint); padding: 0.05rem 0.3rem; border-radius: 3px; }
pre { background: var(--tint); border: 1px solid var(--line); border-radius: 4px; padding: 0.7rem 1rem; overflow-x: auto; }
pre code { background: none; padding: 0; font-size: 0.9em; }
table { border-collapse: collapse; margin: 0.8rem 0 1.2rem; display: block; overflow-x: auto; max-width: 100%; font-size: 0.92rem; }
th, td { border: 1px solid var(--line); padding: 0.35rem 0.6rem; text-align: left; vertical-align: top; }
th { background: var(--tint); }
td code { overflow-wrap: break-word; }
footer { padding: 1rem 1.5rem; border-top: 1px solid var(--line); color: var(--muted); font-size: 0.85rem; }
@media (max-width: 52rem) {
  .frame { display: block; }
  nav.side { position: static; max-height: none; border-right: none; border-bottom: 1px solid var(--line); }
  main { padding: 1rem; }
}
`;
