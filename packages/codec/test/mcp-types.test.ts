// The MCP types the codec publishes are written out in full (no import of the SDK), and are still
// exactly the SDK's: checked by compiling test/types/mcp-types-exact.ts against the SDK.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const here = dirname(fileURLToPath(import.meta.url));

describe("the generated MCP types", () => {
  it("import nothing: no SDK is needed to compile them", () => {
    const text = readFileSync(join(here, "..", "src", "gen", "2.3.0", "mcp-types.ts"), "utf8");
    const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    expect(code).not.toMatch(/\bimport\b|\brequire\(/);
    expect(code).not.toMatch(/\bany\b/);
    expect(code).toMatch(/export type CallToolRequestParams = \{/);
  });

  it("are the SDK's types, both ways, and none is any", () => {
    const file = join(here, "types", "mcp-types-exact.ts");
    const program = ts.createProgram([file], {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: [],
    });
    const diagnostics = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => !d.file || !d.file.fileName.includes("node_modules"))
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    expect(diagnostics).toEqual([]);
  }, 120_000);
});
