// The Markdown reference and the static site, per revision, fed only by the IR: an index, one page
// per frame, per variant of a tagged frame, per error type, per channel table, per exchange group and
// per exchange, the Frames-layer types table with directions, and the MCP types. The Markdown lives
// in docs/<revision>/…/index.md (relative links, readable in the repository); emit/site.ts renders
// the same Markdown into docs/site/ (see docs-url.ts for the paths both share).
import { bytesToHex, carriersOf, DISCRIMINANT, type IrJsonMember, type IrJsonRef, type IrBody, type IrErrorType, type IrErrorVariant, type IrExample, type IrExchange, type IrExchangeGroup, type AnswerPattern, type IrChannel, type IrOpenedPath, type IrOpenedPathGroup, type IrField, type IrFrame, type IrRevision, type IrVariant } from "../ir.js";
import { decodeName, encodeName, variantTypeName } from "../names.js";
import { docsUrl, relativeUrl, slug, type DocTarget } from "./docs-url.js";
import { bodyLayout, headerLayout, intText, layoutOf, variantLayout } from "./layout.js";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { postcardDocs } from "./postcard.js";
import { banner, type GeneratedFile } from "./project.js";
import { renderSite, type SitePage } from "./site.js";

export function emitDocs(revisions: readonly IrRevision[], compilerVersion: string, guide: readonly GuideSource[] = []): GeneratedFile[] {
  if (revisions.length === 0) return [];
  const newest = revisions[revisions.length - 1]!;
  const pages: SitePage[] = [homePage(revisions)];
  for (const ir of revisions) pages.push(...revisionPages(ir));
  if (guide.length > 0) linkGuide(pages, guide);

  const seen = new Map<string, string>();
  for (const page of pages) {
    const before = seen.get(page.url);
    if (before) throw new Error(`docs: "${page.title}" and "${before}" would both live at ${page.url}.`);
    seen.set(page.url, page.title);
  }

  const files: GeneratedFile[] = [];
  for (const page of pages) {
    const ir = revisions.find((r) => r.revision === page.revision) ?? newest;
    files.push({ path: `docs${page.url}index.md`, text: `${banner(ir, compilerVersion, "html")}\n${page.markdown}` });
  }
  files.push(...renderSite(pages, revisions, (ir) => banner(ir, compilerVersion, "html"), newest));
  return files;
}

// ---------------------------------------------------------------------------------------------
// Markdown helpers

/** A Markdown link target from page `from` to page `to`: the relative path of its index.md. */
function href(from: string, to: string, anchor?: string): string {
  if (from === to && anchor) return `#${anchor}`;
  const rel = relativeUrl(from, to);
  return `${rel === "./" ? "" : rel}index.md${anchor ? `#${anchor}` : ""}`;
}

function cell(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|");
}

function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const lines = [`| ${headers.map(cell).join(" | ")} |`, `|${headers.map(() => "---").join("|")}|`];
  for (const row of rows) lines.push(`| ${row.map(cell).join(" | ")} |`);
  return lines.join("\n");
}

function code(text: string): string {
  const ticks = text.includes("`") ? "``" : "`";
  const pad = text.startsWith("`") || text.endsWith("`") ? " " : "";
  return `${ticks}${pad}${text}${pad}${ticks}`;
}

function block(text: string): string {
  return "```text\n" + text + "\n```";
}

function capital(text: string): string {
  if (/^[a-z]+::/.test(text)) return text;
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function lowerFirst(text: string): string {
  return /^[A-Z][a-z]/.test(text) ? text.charAt(0).toLowerCase() + text.slice(1) : text;
}

function firstSentence(text: string): string {
  const match = /^(.+?[.!?])(?=\s+[A-Z`(]|$)/s.exec(text.trim());
  return (match ? match[1]! : text).replace(/\s+/g, " ").trim();
}

function hexOf(bytes: Uint8Array): string {
  const hex = bytesToHex(bytes);
  if (bytes.length > 1024) return `${hex.slice(0, 96).match(/../g)!.join(" ")} … (${bytes.length} bytes)`;
  return hex.length === 0 ? "(no bytes)" : hex.match(/../g)!.join(" ");
}

function section(title: string, ...parts: (string | undefined | false)[]): string {
  const body = parts.filter((p): p is string => typeof p === "string" && p.length > 0);
  return body.length === 0 ? "" : [`## ${title}`, ...body].join("\n\n");
}

function page(title: string, summary: string | undefined, at: string, revision: string | undefined, ...parts: (string | undefined | false)[]): string {
  const head = [`# ${title}`];
  if (summary) head.push(`> ${summary.replace(/\s+/g, " ").trim()}`);
  head.push(`Path: ${code(at)}${revision ? ` · Specification revision ${revision}` : ""}`);
  return [...head, ...parts.filter((p): p is string => typeof p === "string" && p.length > 0)].join("\n\n") + "\n";
}

// ---------------------------------------------------------------------------------------------

function homePage(revisions: readonly IrRevision[]): SitePage {
  const url = docsUrl({ kind: "home" });
  const rows = [...revisions].reverse().map((ir, i) => [
    `[${ir.revision}](${href(url, docsUrl({ kind: "revision", revision: ir.revision }))})${i === 0 ? " (newest)" : ""}`,
    ir.title,
    ir.mcpRevision ? `MCP ${ir.mcpRevision}` : "",
  ]);
  const markdown = page(
    "Diverge protocol reference",
    "Every revision of the Diverge container-proxy protocol, generated from the machine-readable spec in spec/<revision>/*.yaml.",
    url,
    undefined,
    table(["Revision", "Title", "Model Context Protocol"], rows),
    "Each revision's pages keep their paths for good; a page of one revision links to the same page of every other revision that has it.",
  );
  return { url, title: "Diverge protocol reference", markdown };
}

interface Context {
  readonly ir: IrRevision;
  readonly rev: string;
  readonly frameById: Map<string, IrFrame>;
  readonly errorById: Map<string, IrErrorType>;
  readonly groupOf: (exchange: IrExchange) => IrExchangeGroup | undefined;
  readonly url: (t: DocTarget) => string;
  /** For every frame whose bytes are read inside another's variant: where. */
  readonly readInside: Map<string, { frame: IrFrame; variant: IrVariant }[]>;
}

function revisionPages(ir: IrRevision): SitePage[] {
  const rev = ir.revision;
  const frameById = new Map(ir.frames.map((f) => [f.id, f]));
  const errorById = new Map(ir.errorTypes.map((e) => [e.id, e]));
  const readInside = new Map<string, { frame: IrFrame; variant: IrVariant }[]>();
  for (const frame of ir.frames) {
    for (const variant of frame.switch?.variants ?? []) {
      const inner = variant.body.nested?.frameId;
      if (!inner) continue;
      if (!readInside.has(inner)) readInside.set(inner, []);
      readInside.get(inner)!.push({ frame, variant });
    }
  }
  const cx: Context = {
    ir,
    rev,
    frameById,
    errorById,
    groupOf: (x) => ir.exchangeGroups.find((g) => g.exchangeIds.includes(x.id)),
    url: docsUrl,
    readInside,
  };
  const pages: SitePage[] = [];
  pages.push(indexPage(cx));
  pages.push(framesPage(cx));
  pages.push(mcpTypesPage(cx));
  const families = new Map<string, IrFrame[]>();
  for (const frame of ir.frames) {
    if (!frame.family) continue;
    if (!families.has(frame.family.id)) families.set(frame.family.id, []);
    families.get(frame.family.id)!.push(frame);
  }
  for (const frame of ir.frames) {
    if (frame.family && families.get(frame.family.id)![0] === frame) pages.push(familyPage(cx, families.get(frame.family.id)!));
    pages.push(framePage(cx, frame));
    for (const variant of frame.switch?.variants ?? []) pages.push(variantPage(cx, frame, variant));
  }
  for (const error of ir.errorTypes) pages.push(errorTypePage(cx, error));
  for (const t of ir.channelTables) pages.push(channelTablePage(cx, t));
  for (const g of ir.exchangeGroups) {
    pages.push(groupPage(cx, g));
    for (const id of g.exchangeIds) pages.push(exchangePage(cx, ir.exchanges.find((x) => x.id === id)!));
  }
  for (const x of ir.exchanges) if (!cx.groupOf(x)) pages.push(exchangePage(cx, x));
  for (const g of ir.openedPathGroups) pages.push(pathGroupPage(cx, g));
  return pages;
}

// --- shared pieces -----------------------------------------------------------------------------

function frameUrl(cx: Context, frame: IrFrame): string {
  return docsUrl({ kind: "frame", revision: cx.rev, frameId: frame.id });
}

/** A frame's title; a frame declared once for both directions says which direction it is. */
function frameTitle(frame: IrFrame): string {
  return frame.direction ? `${frame.title}, ${frame.direction} side` : frame.title;
}

function frameLink(cx: Context, from: string, frame: IrFrame): string {
  return `[${frameTitle(frame)}](${href(from, frameUrl(cx, frame))})`;
}

function variantUrl(cx: Context, frame: IrFrame, variant: IrVariant): string {
  return docsUrl({ kind: "variant", revision: cx.rev, frame, variant });
}

function errorUrl(cx: Context, error: IrErrorType): string {
  return docsUrl({ kind: "errorType", revision: cx.rev, errorTypeId: error.id });
}

function exchangeUrl(cx: Context, x: IrExchange): string {
  return docsUrl({ kind: "exchange", revision: cx.rev, group: cx.groupOf(x), exchange: x });
}

function mcpTypeLink(cx: Context, from: string, name: string): string {
  return `[${code(name)}](${href(from, docsUrl({ kind: "mcpTypes", revision: cx.rev }), slug(name))})`;
}

function jsonTypeLink(cx: Context, from: string, name: string): string {
  return `[${code(name)}](${href(from, docsUrl({ kind: "mcpTypes", revision: cx.rev }), slug(name))})`;
}

/** A JSON type reference in words, linking named types. */
function jsonRefDoc(cx: Context, from: string, r: IrJsonRef): string {
  switch (r.kind) {
    case "scalar":
      return {
        string: "a string",
        bool: "a boolean",
        u8: "an integer 0–255",
        u64: "a non-negative integer",
        number: "a number",
        decimal: "a number (or a string of one)",
        any: "any JSON value",
        object: "an object",
      }[r.scalar];
    case "named":
      return jsonTypeLink(cx, from, r.name);
    case "array":
      return `an array of ${jsonRefDoc(cx, from, r.of)}`;
    case "nullable":
      return `${jsonRefDoc(cx, from, r.of)} or ${code("null")}`;
  }
}

function jsonMembersTable(cx: Context, from: string, members: readonly IrJsonMember[], on?: { name: string; value: string }): string {
  const rows = [
    ...(on ? [[code(on.name), `${code(JSON.stringify(on.value))}`, "required", "Names this variant."]] : []),
    ...members.map((m) => [code(m.name), jsonRefDoc(cx, from, m.type), m.optional ? "optional (absent or null)" : "required", m.doc]),
  ];
  return rows.length > 0 ? table(["Member", "Type", "", "What it is"], rows) : "No members.";
}

/** The JSON types section of the types page: one heading per type, its members, the frames that carry it. */
function jsonTypesParts(cx: Context, url: string): string[] {
  if (cx.ir.jsonTypes.length === 0) return [];
  const users = (name: string) => {
    const out: string[] = [];
    for (const f of cx.ir.frames) {
      const fields = [...(f.body?.fields ?? []), ...(f.switch?.variants.flatMap((v) => v.body.fields) ?? [])];
      if (fields.some((x) => x.schema?.kind === "json" && x.schema.name === name)) out.push(frameLink(cx, url, f));
    }
    return out;
  };
  const parts = [
    `## JSON types\n\nThe project's own JSON shapes of revision ${cx.rev}, read as serde_json reads a plain struct: unknown members are ignored, a required member must be there, an optional one may be absent or ${code("null")}. A payload that is JSON but not of its type fails to decode with the frame's own error; the reason names members and positions, never a value. In TypeScript each type and its ${code("check<Name>")} come from ${code(`@diverge/codec/${cx.rev}`)}.`,
  ];
  for (const t of cx.ir.jsonTypes) {
    const used = users(t.name);
    const head = `### ${t.name}\n\n${t.doc}${used.length > 0 ? `\n\nCarried by: ${used.join(", ")}.` : ""}`;
    if (t.shape.kind === "array") parts.push(`${head}\n\n${capital(jsonRefDoc(cx, url, { kind: "array", of: t.shape.of }))}.`);
    else if (t.shape.kind === "object") parts.push(`${head}\n\n${jsonMembersTable(cx, url, t.shape.members)}`);
    else {
      const on = t.shape.on;
      const index = table(
        [code(on), "Variant", "What it is"],
        t.shape.variants.map((v) => [code(JSON.stringify(v.value)), `[${code(v.name)}](#${slug(v.name)})`, firstSentence(v.doc)]),
      );
      parts.push(`${head}\n\nA union of ${t.shape.variants.length} objects; the ${code(on)} member decides which, and a value whose ${code(on)} names none of them does not parse.\n\n${index}`);
      for (const v of t.shape.variants) parts.push(`#### ${v.name}\n\n${v.doc}\n\n${jsonMembersTable(cx, url, v.members, { name: on, value: v.value })}`);
    }
  }
  return parts;
}

/** Where a frame's tag table differs from a published one: a section, or undefined. */
function publishedText(frame: IrFrame): string | undefined {
  const p = frame.published;
  if (!p) return undefined;
  const ours = (tag: number) => frame.switch?.variants.find((v) => v.tag === tag);
  const rows = p.tags.map((d) => [code(String(d.tag)), ours(d.tag) ? code(ours(d.tag)!.name) : "—", d.published, d.doc]);
  return `**Differs from ${p.source}.** ${p.doc}\n\n${table(["Tag", "Here", `In ${p.source}`, "Why"], rows)}`;
}

/** What a field's bytes are, in words. */
function fieldTypeText(cx: Context, from: string, f: IrField): string {
  if (f.length === "fixed") return code(intText(f.type));
  if (f.type === "postcard") return `postcard to the end of the payload: a ${frameLink(cx, from, cx.frameById.get(f.postcard!)!)}`;
  if (f.type === "list") return `a ${code("u32, big-endian")} count, then that many entries: ${f.entry!.map((e) => `${code(e.name)} (${fieldTypeText(cx, from, e)}${e.max !== undefined ? `, at most ${e.max}, else the error ${code(e.invalid!)}` : ""})`).join(", ")}`;
  const kind = f.type === "utf8" ? "UTF-8 text" : f.type === "json" ? "JSON" : "bytes";
  const where = f.length === "u16" ? `after its byte length as a ${code("u16, big-endian")}` : "to the end of the payload";
  let text = `${kind} ${where}`;
  if (f.schema) {
    const s = f.schema;
    if (s.kind === "mcp") text += `: ${mcpTypeLink(cx, from, s.name)}${s.nullable ? ` or ${code("null")}` : ""}`;
    else if (s.kind === "mapOfString") text += ": an object whose every member is a string";
    else if (s.kind === "object") text += ": an object";
    else if (s.kind === "json") text += `: ${jsonTypeLink(cx, from, s.name)}`;
    else text += ": any JSON value";
  }
  return text;
}

function fieldList(cx: Context, from: string, fields: readonly IrField[], headerFields: readonly { name: string; type: string; doc: string }[] = []): string {
  const lines = [
    ...headerFields.map((h) => `- **${code(h.name)}** (${code(intText(h.type))}). ${h.doc}`),
    ...fields.map((f) => `- **${code(f.name)}** (${fieldTypeText(cx, from, f)}). ${f.doc}`),
  ];
  return lines.join("\n");
}

function bodyText(cx: Context, from: string, body: IrBody): string {
  const parts: string[] = [];
  if (body.nested) {
    const inner = cx.frameById.get(body.nested.frameId)!;
    parts.push(`The bytes after the tag are a ${frameLink(cx, from, inner)} (${code(inner.name)}): ${inner.doc}`);
  }
  if (body.fields.length === 0) parts.push(body.trailing === "ignore" ? "Carries nothing: the variant is bare, and any bytes after the tag are ignored." : "Carries nothing.");
  else parts.push(fieldList(cx, from, body.fields));
  if (body.fields.length > 0 && body.trailing === "ignore") parts.push("Bytes after the last field are ignored.");
  if (body.exact) parts.push(`The payload must be exactly ${body.fields.reduce((n, f) => n + (f.type === "u8" ? 1 : f.type === "u16" ? 2 : 4), 0)} bytes; any other length is the error ${code(body.exact)}.`);
  return parts.join("\n\n");
}

/** Every exact text an error variant can have, with a nested error's texts written in. */
function messagesOf(cx: Context, variant: IrErrorVariant): string[] {
  const source = variant.fields.find((f) => f.type === "error");
  if (!source || !variant.message.includes(`{${source.name}}`)) return [variant.message];
  const inner = cx.errorById.get(source.errorTypeId!)!;
  return inner.variants.flatMap((v) => messagesOf(cx, v).map((m) => variant.message.replace(`{${source.name}}`, m)));
}

/** What quoted fields of a message stand for. */
function placeholdersText(cx: Context, variant: IrErrorVariant): string {
  const parts: string[] = [];
  for (const f of variant.fields) {
    if (!variant.message.includes(`{${f.name}}`) || f.type === "error") continue;
    parts.push(`${code(`{${f.name}}`)} is ${lowerFirst(f.doc.replace(/\.$/, ""))}`);
  }
  return parts.join("; ");
}

/** Where in a frame each variant of its error type can be raised. */
function raisedWhere(frame: IrFrame): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const add = (name: string | undefined, where: string) => {
    if (!name) return;
    if (!out.has(name)) out.set(name, []);
    if (!out.get(name)!.includes(where)) out.get(name)!.push(where);
  };
  const bodyErrors = (body: IrBody): string[] => (body.nested ? [body.nested.invalid] : [body.truncated, body.exact, ...body.fields.map((f) => f.invalid)].filter((n): n is string => !!n));
  if (frame.header) add(frame.header.truncated, "fewer bytes than the header");
  if (frame.switch) {
    add(frame.switch.unknown, `a ${frame.switch.on} not in the table`);
    for (const v of frame.switch.variants) for (const e of bodyErrors(v.body)) add(e, `${frame.switch.on} ${v.tag} (${code(v.name)})`);
  }
  if (frame.body) for (const e of bodyErrors(frame.body)) add(e, "the body");
  return out;
}

function errorTable(cx: Context, from: string, frame: IrFrame): string {
  const error = cx.errorById.get(frame.errorTypeId)!;
  const where = raisedWhere(frame);
  const rows: string[][] = [];
  for (const v of error.variants) {
    const places = where.get(v.name) ?? [];
    const texts = messagesOf(cx, v).map(code).join("<br>");
    const placeholders = placeholdersText(cx, v);
    rows.push([code(v.name), texts, `${v.doc}${placeholders ? ` ${placeholders}.` : ""}`, places.join("; ") || "—"]);
  }
  const intro = `Reading ${frame.switch ? `any ${frame.title}` : `a ${frame.title}`} fails with [${code(error.name)}](${href(from, errorUrl(cx, error))}) in these ways, and in no other. Each message is exact; a name in braces is the value the error carries.`;
  return `${intro}\n\n${table(["Error", "Message", "Meaning", "Raised for"], rows)}`;
}

function examplesTable(frame: IrFrame, examples: readonly IrExample[]): string {
  if (examples.length === 0) return "";
  const rows = examples.map((e) => {
    let result: string;
    if (e.value) result = `decodes to ${code(JSON.stringify(e.value))}${e.roundTrip ? "" : "; encoding gives other bytes"}`;
    else {
      const err = e.error!;
      result = `fails: ${code(err.variant)}, ${err.message !== undefined ? code(err.message) : `${code(err.messagePrefix!)} and the parser's words`}`;
    }
    return [e.name, code(hexOf(e.bytes)), result];
  });
  void frame;
  return table(["Example", "Bytes (hex)", "Result"], rows);
}

function examplesOfVariant(frame: IrFrame, v: IrVariant): IrExample[] {
  const sw = frame.switch!;
  const header = frame.header!;
  let offset = 0;
  let size = 0;
  for (const f of header.fields) {
    if (f.name === sw.on) offset = size;
    size += f.type === "u8" ? 1 : f.type === "u16" ? 2 : 4;
  }
  const onType = header.fields.find((f) => f.name === sw.on)!.type;
  return frame.examples.filter((e) => {
    if (e.value) return e.value[sw.property] === v.name;
    if (e.bytes.length < size) return false;
    let tag = 0;
    for (let i = 0; i < (onType === "u8" ? 1 : onType === "u16" ? 2 : 4); i++) tag = tag * 256 + e.bytes[offset + i]!;
    return tag === v.tag;
  });
}

function tagTable(cx: Context, from: string, frame: IrFrame, current?: IrVariant): string {
  const sw = frame.switch!;
  const withAnswer = sw.variants.some((v) => v.answer);
  const rows = sw.variants.map((v) => {
    const name = v === current ? `**${code(v.name)}** (this page)` : `[${code(v.name)}](${href(from, variantUrl(cx, frame, v))})`;
    const row = [code(String(v.tag)), name, code(variantLayout(frame, v)), firstSentence(v.doc)];
    if (withAnswer) {
      const x = cx.ir.exchanges.find((e) => e.id === v.answer);
      row.push(x ? `[${code(x.path)}](${href(from, exchangeUrl(cx, x))})` : "—");
    }
    return row;
  });
  return table([capital(sw.on), "Variant", "Layout", "What it is", ...(withAnswer ? ["Answered on"] : [])], rows);
}

function codecLine(frame: IrFrame, rev: string): string {
  return `In TypeScript: ${code(frame.name)}, ${code(decodeName(frame))} and ${code(encodeName(frame))} from ${code(`@diverge/codec/${rev}`)}.`;
}

function malformedText(cx: Context, from: string, frame: IrFrame): string {
  if (frame.malformed) return frame.malformed;
  const parents = cx.readInside.get(frame.id);
  if (parents && parents.length > 0) {
    const list = [...new Map(parents.map((p) => [p.frame.id, p.frame])).values()].map((f) => frameLink(cx, from, f)).join(", ");
    return `These bytes are read inside ${list}; a malformed one is answered as that frame's page says, and its error is wrapped in that frame's error.`;
  }
  return "";
}

/** Where a frame travels, when a channel table lists it: the channels one party opens. */
function travelsText(cx: Context, from: string, frame: IrFrame): string {
  const places = cx.ir.channelTables.flatMap((t) =>
    t.tables
      .filter((e) => e.frameId === frame.id)
      .map((e) => `the request of a channel the ${e.opener} opens (see [${t.title}](${href(from, docsUrl({ kind: "channelTable", revision: cx.rev, channelTableId: t.id }))}))`),
  );
  return places.length > 0 ? `These bytes are ${places.join(", and ")}.` : "";
}

function breadcrumbs(cx: Context, from: string, trail: readonly [string, string][]): string {
  const all: [string, string][] = [[cx.rev, docsUrl({ kind: "revision", revision: cx.rev })], ...trail];
  return all.map(([label, url]) => (url === from ? label : `[${label}](${href(from, url)})`)).join(" › ");
}

// --- pages -----------------------------------------------------------------------------------

function indexPage(cx: Context): SitePage {
  const { ir, rev } = cx;
  const url = docsUrl({ kind: "revision", revision: rev });
  const parts: string[] = [];
  parts.push(ir.doc);
  if (ir.ports.length > 0) parts.push(section("Ports", table(["Name", "Port", "What listens"], ir.ports.map((p) => [p.name, code(String(p.number)), p.doc]))));
  if (ir.exchangeGroups.length > 0) {
    parts.push(
      section(
        "Exchanges",
        ...ir.exchangeGroups.map((g) =>
          [
            `### [${g.title}](${href(url, docsUrl({ kind: "group", revision: rev, groupId: g.id }))})`,
            g.summary,
            table(
              ["Kind", "Ask", "Answered on", "Answer"],
              g.exchangeIds.map((id) => {
                const x = ir.exchanges.find((e) => e.id === id)!;
                return [code(String(x.kind)), `[${x.ask}](${href(url, exchangeUrl(cx, x))})`, code(x.path), messagesText(x)];
              }),
            ),
          ].join("\n\n"),
        ),
      ),
    );
  }
  if (ir.openedPathGroups.length > 0) {
    parts.push(
      section(
        "Paths the provider opens",
        table(
          ["Group", "Paths", "What it is"],
          ir.openedPathGroups.map((g) => [
            `[${g.title}](${href(url, docsUrl({ kind: "pathGroup", revision: rev, groupId: g.id }))})`,
            g.pathIds.map((id) => code(ir.openedPaths.find((p) => p.id === id)!.path)).join(", "),
            firstSentence(g.summary),
          ]),
        ),
      ),
    );
  }
  if (ir.channelTables.length > 0) {
    parts.push(
      section(
        "Channels",
        table(
          ["Channel table", "What it says"],
          ir.channelTables.map((t) => [`[${t.title}](${href(url, docsUrl({ kind: "channelTable", revision: rev, channelTableId: t.id }))})`, firstSentence(t.doc)]),
        ),
      ),
    );
  }
  parts.push(section("Frames", `Every frame of the revision, with its layout, tags, errors and examples, is listed under [all frames](${href(url, docsUrl({ kind: "frames", revision: rev }))}).`, framesTable(cx, url)));
  parts.push(section("MCP types", `The JSON payloads name types of the Model Context Protocol (revision ${ir.mcpRevision}); [the MCP types](${href(url, docsUrl({ kind: "mcpTypes", revision: rev }))}) lists them.`));
  parts.push(notation());
  return { url, revision: rev, title: ir.title || `Revision ${rev}`, nav: { section: "overview" }, markdown: page(ir.title || `Revision ${rev}`, undefined, url, rev, ...parts) };
}

function notation(): string {
  return section(
    "Notation",
    "A layout shows a payload's bytes in order, one bracket per part, with nothing between the parts:",
    table(
      ["Part", "Means"],
      [
        [code("[0]"), "one byte with this value: the tag of a variant"],
        [code("[name: u8]"), "one byte, read as an unsigned integer"],
        [code("[name: u16, big-endian]"), "two bytes, an unsigned integer, most significant byte first"],
        [code("[name: u32, big-endian]"), "four bytes, an unsigned integer, most significant byte first"],
        [code("[name_len: u16, big-endian][name: UTF-8]"), "a byte length, then that many bytes of UTF-8 text"],
        [code("[name: UTF-8 …]"), "UTF-8 text to the end of the payload"],
        [code("[name: bytes …]"), "opaque bytes to the end of the payload, possibly none"],
        [code("[name: JSON …]"), "one JSON text (UTF-8) to the end of the payload, of the type the field names"],
        [code("[ignored …]"), "whatever follows is ignored; an encoder writes nothing there"],
        [code("[payload …]"), "the bytes a tagged frame's variants lay out"],
      ],
    ),
    "Every message is one binary WebSocket message, so the message delimits the payload: no layout carries an overall length. Examples give bytes as hex, two digits per byte. An error message in braces, such as `{tag}`, stands for the value the error carries, written in decimal; `{reason}` is the JSON reader's own words.",
  );
}

function framesTable(cx: Context, from: string): string {
  const rows: string[][] = [];
  const families = new Set<string>();
  for (const f of cx.ir.frames) {
    if (f.family && !families.has(f.family.id)) {
      families.add(f.family.id);
      rows.push([`[${f.family.title}](${href(from, docsUrl({ kind: "family", revision: cx.rev, familyId: f.family.id }))})`, "both directions", firstSentence(f.family.doc)]);
    }
    rows.push([frameLink(cx, from, f), code(f.name), firstSentence(f.doc)]);
  }
  return table(["Frame", "TypeScript", "What it is"], rows);
}

function framesPage(cx: Context): SitePage {
  const url = docsUrl({ kind: "frames", revision: cx.rev });
  const errors = table(
    ["Error type", "Used by", "Messages"],
    cx.ir.errorTypes.map((e) => [
      `[${code(e.name)}](${href(url, errorUrl(cx, e))})`,
      e.usedBy.map((id) => frameLink(cx, url, cx.frameById.get(id)!)).join(", ") || "inside other errors",
      String(e.variants.length),
    ]),
  );
  const markdown = page(
    "Frames and errors",
    `Every frame of revision ${cx.rev}: the bytes each endpoint of the container proxy carries, and the errors reading them can end in.`,
    url,
    cx.rev,
    breadcrumbs(cx, url, [["Frames and errors", url]]),
    section("Frames", framesTable(cx, url)),
    section("Error types", errors),
  );
  return { url, revision: cx.rev, title: "Frames and errors", nav: { section: "frames" }, markdown };
}

function mcpTypesPage(cx: Context): SitePage {
  const url = docsUrl({ kind: "mcpTypes", revision: cx.rev });
  const users = (name: string) => {
    const out: string[] = [];
    for (const f of cx.ir.frames) {
      const fields = [...(f.body?.fields ?? []), ...(f.switch?.variants.flatMap((v) => v.body.fields) ?? [])];
      if (fields.some((x) => x.schema?.kind === "mcp" && x.schema.name === name)) out.push(frameLink(cx, url, f));
    }
    return out;
  };
  const parts = cx.ir.mcpTypes.map((t) =>
    [`### ${t.name}`, t.doc, `The MCP TypeScript SDK's ${code(t.schema)}${t.member ? `, member ${code(t.member)}` : ""}, as MCP revision ${cx.ir.mcpRevision} defines it. Named by: ${users(t.name).join(", ") || "no frame"}.`].join("\n\n"),
  );
  const markdown = page(
    "MCP types",
    `The Model Context Protocol types that JSON payloads of revision ${cx.rev} carry. They are MCP's own (revision ${cx.ir.mcpRevision}), incorporated by reference; a payload that is JSON but not of its type fails to decode as JSON that does not parse does.`,
    url,
    cx.rev,
    breadcrumbs(cx, url, [["MCP types", url]]),
    ...parts,
    ...jsonTypesParts(cx, url),
  );
  return { url, revision: cx.rev, title: "MCP types", nav: { section: "types" }, markdown };
}

function framePage(cx: Context, frame: IrFrame): SitePage {
  const url = frameUrl(cx, frame);
  const parts: string[] = [];
  const framesUrl = docsUrl({ kind: "frames", revision: cx.rev });
  const trail: [string, string][] = [["Frames", framesUrl]];
  if (frame.family) trail.push([frame.family.title, docsUrl({ kind: "family", revision: cx.rev, familyId: frame.family.id })]);
  trail.push([frameTitle(frame), url]);
  parts.push(breadcrumbs(cx, url, trail));
  if (frame.family) {
    const famUrl = docsUrl({ kind: "family", revision: cx.rev, familyId: frame.family.id });
    parts.push(`One direction of the [${frame.family.title}](${href(url, famUrl)}): what the ${frame.direction} sends. ${frame.family.doc}`);
  }
  parts.push(codecLine(frame, cx.rev));
  const travels = travelsText(cx, url, frame);
  if (travels) parts.push(travels);
  for (const x of cx.ir.exchanges.filter((e) => e.answerFrameId === frame.id)) {
    parts.push(`It answers the [${x.ask}](${href(url, exchangeUrl(cx, x))}) exchange: ${messagesText(x)} on ${code(x.path)}.`);
  }
  if (frame.switch) {
    parts.push(section("Layout", block(headerLayout(frame)), fieldList(cx, url, [], frame.header!.fields)));
    const sw = frame.switch;
    parts.push(section(`${capital(sw.on)}s`, `The ${code(sw.on)} says which variant the rest of the bytes are. Any other value is the error ${code(sw.unknown)}. A decoded value names its variant in ${code(DISCRIMINANT)}${sw.property === DISCRIMINANT ? "" : ` (a conformance view, as the examples, in ${code(sw.property)})`}.`, tagTable(cx, url, frame), publishedText(frame)));
    parts.push(
      section(
        "Variants",
        ...sw.variants.map((v) =>
          [
            `### ${v.name}`,
            `${capital(sw.on)} ${code(String(v.tag))}. ${v.doc}`,
            block(variantLayout(frame, v)),
            bodyText(cx, url, v.body),
            `Its own page: [${v.name}](${href(url, variantUrl(cx, frame, v))}).`,
          ].join("\n\n"),
        ),
      ),
    );
  } else if (frame.postcard) {
    parts.push(section("Layout", block(layoutOf(frame)), postcardDocs(cx.ir, frame, code, block)));
  } else {
    parts.push(section("Layout", block(layoutOf(frame)), bodyText(cx, url, frame.body!)));
  }
  parts.push(section("Errors", errorTable(cx, url, frame)));
  parts.push(section("Malformed input", malformedText(cx, url, frame)));
  if (frame.rules.length > 0) parts.push(section("Rules", frame.rules.map((r) => `- ${r}`).join("\n")));
  parts.push(section("Examples", examplesTable(frame, frame.examples)));
  const markdown = page(capital(frameTitle(frame)), firstSentence(frame.doc), url, cx.rev, frame.doc !== firstSentence(frame.doc) ? frame.doc : undefined, ...parts);
  return { url, revision: cx.rev, title: capital(frameTitle(frame)), nav: { section: "frames", sub: !!frame.family }, markdown };
}

function variantPage(cx: Context, frame: IrFrame, v: IrVariant): SitePage {
  const url = variantUrl(cx, frame, v);
  const sw = frame.switch!;
  const title = `${v.name}: ${frameTitle(frame)}, ${sw.on} ${v.tag}`;
  const parts: string[] = [];
  parts.push(breadcrumbs(cx, url, [["Frames", docsUrl({ kind: "frames", revision: cx.rev })], [frameTitle(frame), frameUrl(cx, frame)], [v.name, url]]));
  parts.push(v.doc);
  const travels = travelsText(cx, url, frame);
  if (travels) parts.push(travels);
  parts.push(block(variantLayout(frame, v)));
  const bullets: string[] = [];
  const headerRest = frame.header!.fields.filter((h) => h.name !== sw.on);
  for (const h of headerRest) bullets.push(`- **${code(h.name)}** (${code(intText(h.type))}). ${h.doc}`);
  const on = frame.header!.fields.find((h) => h.name === sw.on)!;
  bullets.push(`- **${code(sw.on)}** (${code(intText(on.type))}). ${on.doc} Here always ${code(String(v.tag))}, for ${code(v.name)}.`);
  parts.push(bullets.join("\n"));
  parts.push(bodyText(cx, url, v.body));
  const malformed = malformedText(cx, url, frame);
  if (malformed) parts.push(`**Malformed.** ${malformed}`);
  if (v.answer) {
    const x = cx.ir.exchanges.find((e) => e.id === v.answer);
    if (x) parts.push(`**Answered** on ${code(x.path)} with ${messagesText(x)}: see the [${x.ask}](${href(url, exchangeUrl(cx, x))}) exchange.`);
  }
  parts.push(`In TypeScript: ${code(variantTypeName(frame, v.name))}, one member of ${code(frame.name)}, read by ${code(decodeName(frame))} and written by ${code(encodeName(frame))} from ${code(`@diverge/codec/${cx.rev}`)}.`);
  parts.push(section("Errors", errorTable(cx, url, frame)));
  parts.push(section("Examples", examplesTable(frame, examplesOfVariant(frame, v))));
  parts.push(section(`Every ${sw.on} of the ${frameTitle(frame)}`, frame.doc, tagTable(cx, url, frame, v)));
  const markdown = page(title, `The payload of the ${frameTitle(frame)} with ${sw.on} ${v.tag}: ${firstSentence(v.doc).replace(/^./, (c) => c.toLowerCase())}`, url, cx.rev, ...parts);
  return { url, revision: cx.rev, title, markdown };
}

function familyPage(cx: Context, members: readonly IrFrame[]): SitePage {
  const family = members[0]!.family!;
  const url = docsUrl({ kind: "family", revision: cx.rev, familyId: family.id });
  const first = members[0]!;
  const tags = new Map<number, { name: string; doc: string; by: Map<string, IrFrame>; layout: string }>();
  for (const m of members) {
    for (const v of m.switch?.variants ?? []) {
      if (!tags.has(v.tag)) tags.set(v.tag, { name: v.name, doc: v.doc, by: new Map(), layout: variantLayout(m, v) });
      tags.get(v.tag)!.by.set(m.direction!, m);
    }
  }
  const directions = members.map((m) => m.direction!);
  const sw = first.switch;
  const rows = [...tags.entries()]
    .sort(([a], [b]) => a - b)
    .map(([tag, t]) => [
      code(String(tag)),
      code(t.name),
      ...directions.map((d) => {
        const m = t.by.get(d);
        const v = m?.switch?.variants.find((x) => x.tag === tag);
        return m && v ? `[yes](${href(url, variantUrl(cx, m, v))})` : "no";
      }),
      code(t.layout),
      firstSentence(t.doc),
    ]);
  const parts: string[] = [];
  parts.push(breadcrumbs(cx, url, [["Frames", docsUrl({ kind: "frames", revision: cx.rev })], [family.title, url]]));
  parts.push(family.doc);
  parts.push(
    table(
      ["Direction", "Frame", "TypeScript"],
      members.map((m) => [capital(m.direction!), `${frameLink(cx, url, m)}: ${m.doc}`, code(m.name)]),
    ),
  );
  if (first.header) parts.push(section("Layout", block(headerLayout(first)), fieldList(cx, url, [], first.header.fields)));
  if (sw) {
    parts.push(
      section(
        `${capital(sw.on)}s and directions`,
        `Which ${sw.on}s each direction may carry. A ${sw.on} that its direction does not carry is the error ${code(sw.unknown)}, even when the other direction carries it.`,
        table([capital(sw.on), "Name", ...directions.map((d) => `${capital(d)} sends`), "Layout", "What it is"], rows),
      ),
    );
  }
  parts.push(section("Errors", errorTable(cx, url, first)));
  const malformed = members.map((m) => m.malformed).find(Boolean);
  if (malformed) parts.push(section("Malformed input", malformed));
  if (first.rules.length > 0) parts.push(section("Rules", first.rules.map((r) => `- ${r}`).join("\n")));
  const markdown = page(capital(family.title), firstSentence(family.doc), url, cx.rev, ...parts);
  return { url, revision: cx.rev, title: capital(family.title), nav: { section: "frames" }, markdown };
}

function errorTypePage(cx: Context, error: IrErrorType): SitePage {
  const url = errorUrl(cx, error);
  const rows = error.variants.map((v) => {
    const fields = v.fields.map((f) => {
      const type = f.type === "error" ? `[${code(cx.errorById.get(f.errorTypeId!)!.name)}](${href(url, errorUrl(cx, cx.errorById.get(f.errorTypeId!)!))})` : f.type === "reason" ? "text" : f.type === "usize" ? "a count" : code(f.type);
      return `${code(f.name)}: ${type}${f.redacted ? " (redacted)" : ""}: ${f.doc}`;
    });
    return [code(v.name), code(v.message), v.doc, fields.join("<br>") || "—"];
  });
  const expanded = error.variants.filter((v) => messagesOf(cx, v).length > 1 || messagesOf(cx, v)[0] !== v.message);
  const users = error.usedBy.map((id) => frameLink(cx, url, cx.frameById.get(id)!));
  const inside = carriersOf(cx.ir, error.id);
  const parts: string[] = [];
  parts.push(breadcrumbs(cx, url, [["Frames and errors", docsUrl({ kind: "frames", revision: cx.rev })], [error.name, url]]));
  if (users.length > 0) parts.push(`Raised by ${users.join(", ")}.`);
  if (inside.length > 0) parts.push(`Carried inside ${inside.map((e) => `[${code(e.name)}](${href(url, errorUrl(cx, e))})`).join(", ")}.`);
  parts.push(`In TypeScript: the class ${code(error.name)} from ${code(`@diverge/codec/${cx.rev}`)}; its ${code("message")} is exactly the text below and its ${code("detail.variant")} the variant's name.`);
  parts.push(section("Variants", table(["Variant", "Message", "Meaning", "Fields"], rows)));
  if (expanded.length > 0) {
    parts.push(
      section(
        "Every exact message",
        "Where a message quotes another error, these are the texts it can read:",
        expanded.map((v) => `- ${code(v.name)}: ${messagesOf(cx, v).map(code).join(", ")}`).join("\n"),
      ),
    );
  }
  const markdown = page(error.name, error.doc, url, cx.rev, ...parts);
  return { url, revision: cx.rev, title: error.name, nav: { section: "errors" }, markdown };
}

function channelTablePage(cx: Context, t: IrRevision["channelTables"][number]): SitePage {
  const url = docsUrl({ kind: "channelTable", revision: cx.rev, channelTableId: t.id });
  const parts: string[] = [breadcrumbs(cx, url, [[t.title, url]])];
  parts.push(t.doc);
  for (const entry of t.tables) {
    const frame = cx.frameById.get(entry.frameId)!;
    const channels =
      entry.channels.length > 0
        ? table(
            ["Tag", "Channel", "Answered with", "Messages", "A bare finish means", "Carries"],
            entry.channels.map((c) => {
              const x = c.exchangeId ? cx.ir.exchanges.find((e) => e.id === c.exchangeId) : undefined;
              return [
                code(String(c.tag)),
                code(c.variantName),
                answerText(cx, url, c.answer),
                `${messagesText(c.answer)}${c.doc ? `. ${c.doc}` : ""}`,
                BARE_FINISH[c.bareFinish],
                x ? `[${x.ask}](${href(url, exchangeUrl(cx, x))}) (kind ${code(String(x.kind))} on ${code("/requests")})` : "",
              ];
            }),
          )
        : undefined;
    parts.push(section(`Opened by the ${entry.opener}`, `${frameLink(cx, url, frame)}: ${frame.doc}`, frame.switch ? tagTable(cx, url, frame) : block(layoutOf(frame)), publishedText(frame), channels ? `How each channel is answered:\n\n${channels}` : undefined, frame.malformed ? `**Malformed.** ${frame.malformed}` : undefined));
  }
  const markdown = page(capital(t.title), firstSentence(t.doc), url, cx.rev, ...parts);
  return { url, revision: cx.rev, title: capital(t.title), nav: { section: "channels" }, markdown };
}

// --- exchanges -------------------------------------------------------------------------------

function messagesText(x: { readonly messages: AnswerPattern; readonly last?: string }): string {
  switch (x.messages) {
    case "one":
      return "exactly one message";
    case "oneWhenHeld":
      return "exactly one message, sent when it holds";
    case "perNotification":
      return "one message per notification";
    case "perItem":
      return x.last ? `one message per item, ${code(x.last)} last` : "one message per item";
    case "raw":
      return "raw bytes both ways";
  }
}

/** The answer frame of an exchange or channel as a link, or what stands for it while it has none. */
function answerText(cx: Context, from: string, answer: { readonly frameId: string | undefined; readonly pendingFrameId?: string }): string {
  if (answer.frameId) return frameLink(cx, from, cx.frameById.get(answer.frameId)!);
  if (answer.pendingFrameId) return `${code(answer.pendingFrameId)} (declared with the filesystem issue)`;
  return "no frame: raw bytes";
}

const BARE_FINISH: Record<IrChannel["bareFinish"], string> = {
  notServed: "not served; never asked again",
  declined: "the provider declined the connection",
  unknownConnection: "the id names no connection whose half is open",
};

function askVariant(cx: Context, x: IrExchange): { frame: IrFrame; variant: IrVariant } | undefined {
  const frame = cx.frameById.get(x.askFrameId);
  const variant = frame?.switch?.variants.find((v) => v.tag === x.kind);
  return frame && variant ? { frame, variant } : undefined;
}

function ruleList(rules: IrExchangeGroup["rules"]): string {
  return rules.map((r) => `- **${r.title}.** ${r.text}`).join("\n");
}

function groupPage(cx: Context, g: IrExchangeGroup): SitePage {
  const url = docsUrl({ kind: "group", revision: cx.rev, groupId: g.id });
  const xs = g.exchangeIds.map((id) => cx.ir.exchanges.find((e) => e.id === id)!);
  const parts: string[] = [breadcrumbs(cx, url, [[g.title, url]])];
  const askFrames = [...new Set(xs.map((x) => x.askFrameId))].map((id) => cx.frameById.get(id)!);
  parts.push(
    `Each exchange starts with an ask, a ${askFrames.map((f) => frameLink(cx, url, f)).join(" or ")} naming the exchange's kind and a fresh channel. The provider answers by opening the exchange's answer path, with that channel in place of ${code("{channel}")}, and sending the answer there.`,
  );
  parts.push(
    table(
      ["Kind", "Ask", "Payload", "Answered on", "Answer"],
      xs.map((x) => [code(String(x.kind)), x.ask, x.payload, `[${code(x.path)}](${href(url, exchangeUrl(cx, x))})`, messagesText(x)]),
    ),
  );
  parts.push(section("Rules", ruleList(g.rules)));
  const bytes: string[] = [];
  for (const x of xs) {
    const ask = askVariant(cx, x);
    const answer = x.answerFrameId ? cx.frameById.get(x.answerFrameId)! : undefined;
    const lines = [`### [${capital(x.ask)}](${href(url, exchangeUrl(cx, x))})`];
    const layout: string[] = [];
    if (ask) layout.push(`ask:    ${variantLayout(ask.frame, ask.variant)}`);
    for (const v of answer?.switch?.variants ?? []) layout.push(`answer: ${variantLayout(answer!, v)}   ${v.name}`);
    if (answer?.body) layout.push(`answer: ${layoutOf(answer)}`);
    if (!answer) layout.push(`answer: ${x.pendingAnswerFrameId ? `a ${x.pendingAnswerFrameId} (declared with the filesystem issue)` : "raw bytes, no frame"}`);
    lines.push(block(layout.join("\n")));
    const fields = [...(ask?.variant.body.fields ?? []), ...(answer?.switch?.variants.flatMap((v) => v.body.fields) ?? answer?.body?.fields ?? [])];
    lines.push(fieldList(cx, url, fields.filter((f, i) => fields.findIndex((o) => o.name === f.name && o.doc === f.doc) === i)));
    bytes.push(lines.join("\n\n"));
  }
  parts.push(section("The bytes", `The ask on ${code("/requests")} and the messages on the answer path, in the [notation](${href(url, docsUrl({ kind: "revision", revision: cx.rev }), "notation")}).`, ...bytes));
  const answerErrors = [...new Set(xs.flatMap((x) => (x.answerFrameId ? [cx.frameById.get(x.answerFrameId)!.errorTypeId] : [])))].map((id) => cx.errorById.get(id)!);
  for (const error of answerErrors) {
    const users = error.usedBy.filter((id) => xs.some((x) => x.answerFrameId === id));
    parts.push(
      section(
        `When an answer does not decode`,
        `Reading ${users.length === xs.length ? "any of the answers" : users.map((id) => frameLink(cx, url, cx.frameById.get(id)!)).join(", ")} fails with [${code(error.name)}](${href(url, errorUrl(cx, error))}): ${error.doc}`,
        table(
          ["Error", "Message", "Meaning"],
          error.variants.map((v) => {
            const placeholders = placeholdersText(cx, v);
            return [code(v.name), messagesOf(cx, v).map(code).join("<br>"), `${v.doc}${placeholders ? ` ${placeholders}.` : ""}`];
          }),
        ),
      ),
    );
  }
  for (const f of askFrames) {
    const err = cx.errorById.get(f.errorTypeId)!;
    parts.push(section("When an ask does not decode", `An ask that does not decode fails with [${code(err.name)}](${href(url, errorUrl(cx, err))}); see the ${frameLink(cx, url, f)} page for every text. ${f.malformed ?? ""}`.trim()));
  }
  const markdown = page(g.title, g.summary, url, cx.rev, ...parts);
  return { url, revision: cx.rev, title: g.title, nav: { section: "exchanges" }, markdown };
}

function exchangePage(cx: Context, x: IrExchange): SitePage {
  const url = exchangeUrl(cx, x);
  const g = cx.groupOf(x);
  const ask = askVariant(cx, x);
  const answer = x.answerFrameId ? cx.frameById.get(x.answerFrameId)! : undefined;
  const groupUrl = g ? docsUrl({ kind: "group", revision: cx.rev, groupId: g.id }) : undefined;
  const parts: string[] = [breadcrumbs(cx, url, [...(g && groupUrl ? ([[g.title, groupUrl]] as [string, string][]) : []), [capital(x.ask), url]])];
  if (ask) parts.push(ask.variant.doc);
  const facts: string[][] = [
    ["Kind", code(String(x.kind))],
    ["Ask", ask ? `[${code(ask.variant.name)}](${href(url, variantUrl(cx, ask.frame, ask.variant))}) of the ${frameLink(cx, url, ask.frame)}` : code(x.askFrameId)],
    ["Payload", x.payload],
    ["Answered on", code(x.path)],
    ["Answer", answer ? `${messagesText(x)}, each a ${frameLink(cx, url, answer)} (${code(answer.name)})` : `${messagesText(x)}, ${answerText(cx, url, { frameId: undefined, pendingFrameId: x.pendingAnswerFrameId })}`],
    ["Unanswered", x.unanswered === "askedAgain" ? "asked again under a fresh channel" : "never asked again; reported inside the container as failed"],
  ];
  if (x.standing) {
    const after = x.standing.afterIds.map((id) => code(String(cx.ir.exchanges.find((e) => e.id === id)!.kind)));
    facts.push(["Standing", `kept for the proxy's life: first asked after the proxy's first exchange of kind ${after.join(", ")}; asked again on the next ${code("/requests")} connection when its path ends`]);
  }
  if (x.channel) {
    const tables = (x.channels ?? [x.channel]).map((c) => cx.ir.channelTables.find((t) => t.id === c.tableId)!);
    const links = tables.map((t) => `[${t.title}](${href(url, docsUrl({ kind: "channelTable", revision: cx.rev, channelTableId: t.id }))})`).join(", ");
    facts.push(["On the begin scope", `the ${code(x.channel.variantName)} channel (tag ${code(String(x.channel.tag))}) the ${x.channel.opener} opens; see ${links}`]);
  }
  parts.push(table(["", capital(x.ask)], facts));
  if (ask) {
    parts.push(section("The ask", block(variantLayout(ask.frame, ask.variant)), fieldList(cx, url, ask.variant.body.fields, ask.frame.header!.fields.filter((h) => h.name !== ask.frame.switch!.on)), `The ${code(ask.frame.switch!.on)} byte is ${code(String(x.kind))}.`));
  }
  const answerParts: string[] = [];
  if (answer?.switch) {
    for (const v of answer.switch.variants) {
      answerParts.push([`### ${v.name}`, `${capital(answer.switch.on)} ${code(String(v.tag))}. ${v.doc}`, block(variantLayout(answer, v)), bodyText(cx, url, v.body)].join("\n\n"));
    }
  } else if (answer) answerParts.push(block(layoutOf(answer)), bodyText(cx, url, answer.body!));
  parts.push(
    section(
      "The answer",
      answer
        ? `The provider opens ${code(x.path)} with the ask's channel and sends ${messagesText(x)} on it, each one binary message holding a ${frameLink(cx, url, answer)}.`
        : x.messages === "raw"
          ? `The provider opens ${code(x.path)} with the ask's channel; the path carries raw bytes both ways, each binary message an arbitrary chunk with no tag and no framing.`
          : `The provider opens ${code(x.path)} with the ask's channel and sends ${messagesText(x)} on it, each a ${code(x.pendingAnswerFrameId!)}, a frame declared with the filesystem issue.`,
      ...answerParts,
    ),
  );
  parts.push(section("How the exchange ends", endings(x), "These follow from the exchange's own facts; the rules below can add to them."));
  const rules = g ? g.rules.filter((r) => !r.exchangeIds || r.exchangeIds.includes(x.id)) : [];
  if (g && rules.length > 0) parts.push(section("Rules", `The rules of the [${g.title}](${href(url, groupUrl!)}) that hold for this exchange:`, ruleList(rules)));
  if (answer) parts.push(section("Errors", errorTable(cx, url, answer)));
  const askExamples = ask ? examplesOfVariant(ask.frame, ask.variant) : [];
  parts.push(section("Examples", askExamples.length > 0 ? `Asks:\n\n${examplesTable(ask!.frame, askExamples)}` : undefined, answer && answer.examples.length > 0 ? `Answers:\n\n${examplesTable(answer, answer.examples)}` : undefined));
  const title = capital(x.ask);
  const summary = `Kind ${x.kind} of ${g ? `the ${g.title}` : "the exchanges"}: asked with ${x.payload}, answered on ${x.path} with ${messagesText(x)}.`;
  const markdown = page(title, summary, url, cx.rev, ...parts);
  return { url, revision: cx.rev, title, nav: { section: "exchanges", sub: !!g }, markdown };
}

function pathGroupPage(cx: Context, g: IrOpenedPathGroup): SitePage {
  const url = docsUrl({ kind: "pathGroup", revision: cx.rev, groupId: g.id });
  const paths = g.pathIds.map((id) => cx.ir.openedPaths.find((p) => p.id === id)!);
  const parts: string[] = [breadcrumbs(cx, url, [[g.title, url]])];
  const sends = (p: IrOpenedPath): string => {
    const frame = p.request.frameId ? frameLink(cx, url, cx.frameById.get(p.request.frameId)!) : p.request.pendingFrameId ? `${code(p.request.pendingFrameId)} (declared with the filesystem issue)` : "";
    if (p.request.messages === "none") return "nothing";
    if (p.request.messages === "one") return `exactly one message, a ${frame}`;
    return `one message, a ${frame}; then the content in non-empty pieces; then one empty message`;
  };
  parts.push(
    `The provider opens each of these paths itself, with no ask before it, any number of times; each opening is one exchange. It sends its request first; the proxy answers on the same path.`,
    table(
      ["Path", "The provider sends", "The proxy answers", "Closed by"],
      paths.map((p) => [code(p.path), sends(p), `${messagesText(p.answer)}, each ${answerText(cx, url, p.answer)}`, `the ${p.closedBy}`]),
    ),
  );
  for (const p of paths) parts.push(section(capital(p.title), p.doc));
  parts.push(section("Rules", ruleList(g.rules)));
  const markdown = page(g.title, g.summary, url, cx.rev, ...parts);
  return { url, revision: cx.rev, title: g.title, nav: { section: "exchanges" }, markdown };
}

/** What each way a path can end means for the exchange, from the exchange's own facts. */
function endings(x: IrExchange): string {
  const again = "the proxy asks the exchange again on the next `/requests` connection, under a fresh channel, so the provider may receive it more than once";
  const never = "the proxy does not ask it again";
  const lines: string[] = [];
  if (x.messages === "one" || x.messages === "oneWhenHeld") {
    lines.push("- **Its message, then a clean close.** The exchange is answered.");
  } else if (x.messages === "raw") {
    lines.push("- **A close by either party, clean or not.** The connection has ended.");
  } else {
    lines.push("- **Messages, then a clean close.** The stream is over; an error message, when there is one, is the last message.");
  }
  lines.push(`- **A clean close with no message before it.** The ask was not served; ${x.notServed === "askedAgain" ? again : never}.`);
  lines.push(`- **An abrupt end of the path.** The exchange is not answered; ${x.unanswered === "askedAgain" ? again : never}.`);
  lines.push(`- **${code("/requests")} ended before the path was opened.** The exchange is not answered; ${x.unanswered === "askedAgain" ? again : never}.`);
  return lines.join("\n");
}

export type { SitePage };

// ---------------------------------------------------------------------------------------------
// The guide: hand-written pages under docs-src/guide/*.md (how to use the libraries), published
// beside the wire reference at /guide/<name>/ and linked both ways with it.

/** One hand-written guide page: its file name without `.md`, and its Markdown. */
export interface GuideSource {
  readonly name: string;
  readonly markdown: string;
}

export const GUIDE_DIR = "docs-src/guide";
/** The order the guide's pages are read in; a page not listed follows, by name. */
const GUIDE_ORDER = ["run-a-provider", "write-a-container-program", "run-the-proxy", "use-the-codec"];

/** The guide's pages under `root`, in reading order (none when the folder is missing). */
export function readGuide(root: string): GuideSource[] {
  const dir = join(root, GUIDE_DIR);
  if (!existsSync(dir)) return [];
  const names = readdirSync(dir)
    .filter((f) => f.endsWith(".md"))
    .map((f) => f.slice(0, -3))
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return names.map((name) => ({ name, markdown: readFileSync(join(dir, `${name}.md`), "utf8") }));
}

function rank(name: string): number {
  const at = GUIDE_ORDER.indexOf(name);
  return at < 0 ? GUIDE_ORDER.length : at;
}

function guideTitle(source: GuideSource): string {
  const heading = /^# (.+)$/m.exec(source.markdown);
  if (!heading) throw new Error(`docs: ${GUIDE_DIR}/${source.name}.md has no "# " title`);
  return heading[1]!.trim();
}

function guideSummary(source: GuideSource): string {
  const quote = /^> (.+(?:\n> .+)*)$/m.exec(source.markdown);
  return quote ? quote[1]!.replace(/\n> /g, " ").trim() : "";
}

/** Adds the guide's pages and its index, and links the home page and every revision index to it. */
function linkGuide(pages: SitePage[], guide: readonly GuideSource[]): void {
  const indexUrl = "/guide/";
  const rows = guide.map((source) => [`[${guideTitle(source)}](${href(indexUrl, `/guide/${source.name}/`)})`, guideSummary(source)]);
  const wire = pages.filter((p) => p.revision && p.nav?.section === "overview");
  pages.push({
    url: indexUrl,
    title: "Guide",
    nav: { section: "guide" },
    markdown: page(
      "Guide",
      "How to use the diverge-ts libraries and binaries: run a provider, write a container program, run the proxy, use the codec.",
      indexUrl,
      undefined,
      table(["Page", "What it covers"], rows),
      `What goes over the wire is in the reference: ${wire.map((p) => `[revision ${p.revision}](${href(indexUrl, p.url)})`).join(", ")}.`,
    ),
  });
  for (const source of guide) {
    const url = `/guide/${source.name}/`;
    const back = `---\n\n[All guide pages](${href(url, indexUrl)}) · [The wire reference](${href(url, "/")})\n`;
    pages.push({ url, title: guideTitle(source), nav: { section: "guide" }, markdown: `${source.markdown.trimEnd()}\n\n${back}` });
  }
  for (let i = 0; i < pages.length; i++) {
    const p = pages[i]!;
    const toGuide = `[the guide](${href(p.url, indexUrl)})`;
    if (p.url === "/") pages[i] = { ...p, markdown: `${p.markdown.trimEnd()}\n\n## Guide\n\nHow to use the libraries and binaries — run a provider, write a container program, run the proxy, use the codec — is in ${toGuide}.\n` };
    else if (p.revision && p.nav?.section === "overview") pages[i] = { ...p, markdown: `${p.markdown.trimEnd()}\n\n## Guide\n\nThe calls of the libraries that make these exchanges are in ${toGuide}.\n` };
  }
}
void bodyLayout;
