// Reads every YAML file of one spec revision and keeps each node's source position, so that every
// later check can point a maintainer at file:line:column.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { isMap, isSeq, LineCounter, parseDocument, type Document, type Node } from "yaml";

export interface SourceFile {
  readonly path: string;
  readonly text: string;
  readonly doc: Document;
  readonly lines: LineCounter;
}

export type PathKey = string | number;

/** A place in the spec: the file and, where known, the line and column (1-based). */
export interface Place {
  readonly file: string;
  readonly line: number;
  readonly column: number;
}

export class SpecError extends Error {
  constructor(
    readonly place: Place,
    readonly sentence: string,
  ) {
    super(`${place.file}:${place.line}:${place.column}: ${sentence}`);
    this.name = "SpecError";
  }
}

/** Several spec mistakes at once, so a maintainer sees them all in one run. */
export class SpecErrors extends Error {
  constructor(readonly errors: readonly SpecError[]) {
    super(errors.map((e) => e.message).join("\n"));
    this.name = "SpecErrors";
  }
}

export interface LoadedSpec {
  readonly dir: string;
  readonly files: readonly SourceFile[];
}

export function loadSpecDir(dir: string, root: string = process.cwd()): LoadedSpec {
  const names = readdirSync(dir)
    .filter((name) => name.endsWith(".yaml") || name.endsWith(".yml"))
    .sort();
  const files: SourceFile[] = [];
  const errors: SpecError[] = [];
  for (const name of names) {
    const full = join(dir, name);
    const text = readFileSync(full, "utf8");
    const lines = new LineCounter();
    const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
    const path = relative(root, full).split("\\").join("/");
    for (const problem of doc.errors) {
      const pos = problem.linePos?.[0] ?? { line: 1, col: 1 };
      errors.push(new SpecError({ file: path, line: pos.line, column: pos.col }, problem.message.split("\n")[0]!));
    }
    files.push({ path, text, doc, lines });
  }
  if (errors.length > 0) throw new SpecErrors(errors);
  return { dir, files };
}

/** The place of the node at `path` in `file`, or of its nearest existing ancestor. */
export function placeOf(file: SourceFile, path: readonly PathKey[]): Place {
  let node: unknown = file.doc.contents;
  let best: Node | undefined = isNode(node) ? node : undefined;
  for (const key of path) {
    if (isMap(node)) {
      const pair = node.items.find((item) => {
        const k = item.key as { value?: unknown } | null;
        return (k && typeof k === "object" && "value" in k ? k.value : k) === key;
      });
      if (!pair) break;
      node = pair.value;
      const keyNode = pair.key;
      if (isNode(node)) best = node;
      else if (isNode(keyNode)) best = keyNode;
    } else if (isSeq(node) && typeof key === "number") {
      node = node.items[key];
      if (isNode(node)) best = node;
      else break;
    } else break;
  }
  const offset = best?.range?.[0] ?? 0;
  const pos = file.lines.linePos(offset);
  return { file: file.path, line: pos.line, column: pos.col };
}

function isNode(value: unknown): value is Node {
  return typeof value === "object" && value !== null && "range" in value;
}
