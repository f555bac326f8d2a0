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
  return [
    { path: "packages/codec/src/index.ts", text: index },
    { path: "packages/codec/src/gen/mcp-schemas.ts", text: schemas },
  ];
}
