// Info: the container's DIVERGE.md, read from its root and split into front matter and body.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";

export interface DivergeInfo {
  readonly frontMatter: Record<string, unknown>;
  readonly body: string;
}

/** Reads `DIVERGE.md` from `root`; undefined when the image has none. */
export async function readDivergeInfo(root: string): Promise<DivergeInfo | undefined> {
  let text: string;
  try {
    text = await readFile(join(root, "DIVERGE.md"), "utf8");
  } catch {
    return undefined;
  }
  return parseDivergeMarkdown(text);
}

const FRONT_MATTER = /^---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;

/** Front matter is a leading YAML block between `---` lines; `{}` when absent or not a mapping. */
export function parseDivergeMarkdown(text: string): DivergeInfo {
  const source = text.startsWith("\uFEFF") ? text.slice(1) : text;
  const match = FRONT_MATTER.exec(source);
  if (!match) return { frontMatter: {}, body: source };
  let parsed: unknown;
  try {
    parsed = parseYaml(match[1]!);
  } catch {
    // A block that is not YAML is not front matter: the whole file is the body.
    return { frontMatter: {}, body: source };
  }
  const frontMatter = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  return { frontMatter, body: source.slice(match[0].length) };
}
