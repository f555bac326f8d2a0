// Info: the container's DIVERGE.md, read from its root and split into front matter and body.
//
// The answer always describes the file. Front matter is a leading block between `---` lines that is
// a YAML mapping of JSON values (or empty). A block that is anything else — not YAML, a scalar or a
// sequence, an alias, a tag YAML does not know, a value JSON cannot carry (`!!binary`, `!!set`,
// `.inf`, `.nan`), a collection as a key, or nesting deeper than a JSON reader takes — is no front
// matter: the answer is `frontMatter: {}` and the whole file as `body`, and the log says which of
// those it was, quoting nothing of the file. The `yaml` library's warnings (which quote the file)
// are never printed.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { isAlias, isCollection, isMap, isPair, parseDocument, visit } from "yaml";

export interface DivergeInfo {
  readonly frontMatter: Record<string, unknown>;
  readonly body: string;
}

/** What the proxy can say of the image's DIVERGE.md. */
export type InfoOutcome =
  | { readonly variant: "Info"; readonly info: DivergeInfo }
  | { readonly variant: "None" }
  /** The file exists but cannot be answered: unreadable, or larger than an answer may be. */
  | { readonly variant: "NotServed"; readonly reason: string; readonly tooLarge: boolean };

export interface InfoOptions {
  /** Where a front matter that is not one is reported; the line quotes nothing of the file. */
  readonly log?: Say;
}

/**
 * JSON readers refuse nesting deeper than 128 levels (serde_json, and the codec's reader). The answer
 * is `{"frontMatter": {…}}`, two levels before the front matter's own values, so those may nest 126.
 */
const MAX_ANSWER_DEPTH = 128;

/** Reads `DIVERGE.md` from `root`; undefined when the image has none (or it cannot be read). */
export async function readDivergeInfo(root: string, options: InfoOptions = {}): Promise<DivergeInfo | undefined> {
  const outcome = await loadDivergeInfo(root, { ...options, maxBytes: Infinity });
  return outcome.variant === "Info" ? outcome.info : undefined;
}

/**
 * Reads `DIVERGE.md` from `root` for an Info answer: `None` only when there is no such file; a file
 * larger than `maxBytes` is not read at all (its answer could not be sent).
 */
export async function loadDivergeInfo(root: string, options: InfoOptions & { readonly maxBytes: number }): Promise<InfoOutcome> {
  const path = join(root, "DIVERGE.md");
  try {
    const found = await stat(path);
    if (!found.isFile()) return { variant: "NotServed", reason: "it is not a regular file", tooLarge: false };
    if (found.size > options.maxBytes) return { variant: "NotServed", reason: `it is ${found.size} bytes, larger than the message limit of ${options.maxBytes}`, tooLarge: true };
    return { variant: "Info", info: parseDivergeMarkdown(await readFile(path, "utf8"), options) };
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ENOENT" || code === "ENOTDIR") return { variant: "None" };
    return { variant: "NotServed", reason: `it could not be read (${code ?? "error"})`, tooLarge: false };
  }
}

const FRONT_MATTER = /^---[ \t]*\r?\n(?:([\s\S]*?)\r?\n)?---[ \t]*(?:\r?\n|$)/;

/** Front matter is a leading YAML mapping of JSON values between `---` lines; see the file's header. */
export function parseDivergeMarkdown(text: string, options: InfoOptions = {}): DivergeInfo {
  const source = text.startsWith("\uFEFF") ? text.slice(1) : text;
  const match = FRONT_MATTER.exec(source);
  if (!match) return { frontMatter: {}, body: source };
  const read = readFrontMatter(match[1] ?? "");
  if ("problem" in read) {
    options.log?.(...logEvent("DIVERGE.md: its leading --- block is no front matter ({problem}); answering frontMatter {} and the whole file as body", { problem: read.problem }));
    return { frontMatter: {}, body: source };
  }
  return { frontMatter: read.value, body: source.slice(match[0].length) };
}

function readFrontMatter(block: string): { value: Record<string, unknown> } | { problem: string } {
  try {
    // `logLevel: "silent"`: the library's warnings quote the file and must not reach stderr.
    const doc = parseDocument(block, { logLevel: "silent", prettyErrors: false, uniqueKeys: true });
    if (doc.errors.length > 0) return { problem: "it is not YAML" };
    if (doc.warnings.length > 0) return { problem: "it has a tag YAML does not know" };
    // Empty, or comments only: an empty mapping.
    if (doc.contents === null) return { value: {} };
    if (!isMap(doc.contents)) return { problem: "it is not a mapping" };
    let problem: string | undefined;
    visit(doc, {
      Alias() {
        problem = "it has an alias";
        return visit.BREAK;
      },
      Pair(_key, pair) {
        if (isPair(pair) && (isCollection(pair.key) || isAlias(pair.key))) {
          problem = "it has a key that is not a plain value";
          return visit.BREAK;
        }
        return undefined;
      },
    });
    if (problem) return { problem };
    const value: unknown = doc.toJS({ maxAliasCount: 0 });
    const why = notJson(value, 2);
    if (why) return { problem: why };
    return { value: value as Record<string, unknown> };
  } catch {
    // The parser's own failure (a stack overflow on absurd nesting, say): not front matter either.
    return { problem: "it could not be read as YAML" };
  }
}

/** Why `value` (at `depth` in the answer) is not plain JSON a reader takes; undefined when it is. */
function notJson(value: unknown, depth: number): string | undefined {
  if (value === null || typeof value === "string" || typeof value === "boolean") return undefined;
  if (typeof value === "number") return Number.isFinite(value) ? undefined : "it has a number JSON cannot carry (.inf or .nan)";
  if (typeof value !== "object") return "it has a value JSON cannot carry";
  if (depth > MAX_ANSWER_DEPTH) return `it nests deeper than ${MAX_ANSWER_DEPTH - 2} levels`;
  if (Array.isArray(value)) {
    for (const item of value) {
      const why = notJson(item, depth + 1);
      if (why) return why;
    }
    return undefined;
  }
  const prototype = Object.getPrototypeOf(value) as unknown;
  if (prototype !== Object.prototype && prototype !== null) return "it has a value JSON cannot carry (such as !!binary, !!set or a timestamp)";
  for (const key of Object.keys(value)) {
    const why = notJson((value as Record<string, unknown>)[key], depth + 1);
    if (why) return why;
  }
  return undefined;
}
