// The codec's entry points that span revisions: the package root re-exports the newest revision,
// and the MCP schema table covers every MCP type any revision names.
import type { IrRevision } from "../ir.js";
import { lit } from "../names.js";
import { banner, type GeneratedFile } from "./project.js";

export function emitCodecRoot(revisions: readonly IrRevision[], compilerVersion: string): GeneratedFile[] {
  const newest = revisions[revisions.length - 1]!;
  const head = banner(newest, compilerVersion).trimEnd();
  const index = [
    head,
    `/**`,
    ` * @diverge/codec: every frame of the Diverge container-proxy protocol, generated from its spec.`,
    ` * The root is the newest revision (${newest.revision}); each revision also has its own subpath,`,
    ` * e.g. \`@diverge/codec/${newest.revision}\`.`,
    ` */`,
    `export * from ${lit(`./gen/${newest.revision}/index.js`)};`,
    `export { DecodeError, EncodeError, toHex, fromHex, type ErrorDetail, type DecodeOptions, type TypeCheck } from "./runtime/index.js";`,
    `/** Every revision this build of the codec speaks, oldest first. */`,
    `export const revisions = [${revisions.map((r) => lit(r.revision)).join(", ")}] as const;`,
    `/** A spec revision this build of the codec speaks. */`,
    `export type Revision = (typeof revisions)[number];`,
    "",
  ].join("\n");
  const byName = new Map<string, { schema: string; member?: string }>();
  for (const ir of revisions) for (const t of ir.mcpTypes) byName.set(t.name, t);
  const names = [...byName.keys()].sort();
  const schemaImports = [...new Set(names.map((n) => byName.get(n)!.schema))].sort();
  const schemas = [
    head,
    `// The MCP SDK's own zod schemas for every MCP type a frame names; \`@diverge/codec/mcp\` checks with them.`,
    `import { ${schemaImports.join(", ")} } from "@modelcontextprotocol/sdk/types.js";`,
    "",
    `/** Any schema of the SDK: all the check needs is zod's \`safeParse\`. */`,
    `export interface McpSchema {`,
    `  safeParse(value: unknown): { success: true } | { success: false; error: { issues: readonly { message: string; path: readonly PropertyKey[] }[] } };`,
    `}`,
    "",
    `export const mcpSchemas: Readonly<Record<${names.map((n) => lit(n)).join(" | ")}, McpSchema>> = {`,
    ...names.map((n) => {
      const t = byName.get(n)!;
      return `  ${n}: ${t.schema}${t.member ? `.shape.${t.member}` : ""},`;
    }),
    `};`,
    "",
  ].join("\n");
  // The exchange descriptors have a subpath of their own, so the root (every frame) stays its size.
  const exchanges = [
    head,
    `/**`,
    ` * @diverge/codec/exchanges: the exchanges of the newest revision (${newest.revision}): which kind is answered on`,
    ` * which path, with which frames, in which pattern, and their fate rules; the engines of`,
    ` * @diverge/server and @diverge/client read these.`,
    ` */`,
    `export * from ${lit(`./gen/${newest.revision}/exchanges.js`)};`,
    "",
  ].join("\n");
  return [
    { path: "packages/codec/src/exchanges.ts", text: exchanges },
    { path: "packages/codec/src/index.ts", text: index },
    { path: "packages/codec/src/gen/mcp-schemas.ts", text: schemas },
  ];
}

/** The `./<revision>` subpath exports of @diverge/codec, one per revision, oldest first. */
export function codecRevisionExports(revisions: readonly IrRevision[]): Record<string, { types: string; default: string }> {
  return Object.fromEntries(
    revisions.map((ir) => [`./${ir.revision}`, { types: `./dist/gen/${ir.revision}/index.d.ts`, default: `./dist/gen/${ir.revision}/index.js` }]),
  );
}

/**
 * packages/codec/package.json with its `exports` map in step with the revisions: one `./<revision>`
 * subpath per revision under spec/, in place of the old ones, and nothing else touched. The text
 * comes back unchanged when the map already is right, so hand edits elsewhere in the file stay as
 * they are; otherwise only the `exports` value is reprinted.
 */
export function emitCodecPackageJson(current: string, revisions: readonly IrRevision[]): GeneratedFile {
  const path = "packages/codec/package.json";
  const manifest = JSON.parse(current) as { exports?: Record<string, unknown> };
  const old = manifest.exports ?? {};
  const isRevision = (key: string) => /^\.\/\d+\.\d+\.\d+$/.test(key);
  const wanted = codecRevisionExports(revisions);
  const next: Record<string, unknown> = {};
  let placed = false;
  const place = () => {
    if (placed) return;
    placed = true;
    Object.assign(next, wanted);
  };
  for (const [key, value] of Object.entries(old)) {
    if (isRevision(key)) {
      place();
      continue;
    }
    if (key !== "." && !placed) place();
    next[key] = value;
  }
  place();
  if (JSON.stringify(next) === JSON.stringify(old)) return { path, text: current };
  const at = findExportsValue(current);
  if (!at) throw new Error(`${path} has no "exports" object for the revision subpaths.`);
  const printed = JSON.stringify(next, null, 2).replace(/\n/g, `\n${at.indent}`);
  return { path, text: current.slice(0, at.start) + printed + current.slice(at.end) };
}

/** Where the top-level `"exports": { … }` value sits in a package.json text, and its key's indent. */
function findExportsValue(text: string): { start: number; end: number; indent: string } | undefined {
  const key = /^([ \t]*)"exports"\s*:\s*\{/m.exec(text);
  if (!key) return undefined;
  const start = key.index + key[0].length - 1;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return { start, end: i + 1, indent: key[1]! };
  }
  return undefined;
}
