// No exported name means two things across @diverge/*: for every name two installed packages both
// export, it must be the very same declaration (a re-export), never two different ones.
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, inject, it } from "vitest";
import { publicPackages } from "./packages.js";

const { project } = inject("consumer");

describe("the exported names of @diverge/*", () => {
  it("mean one thing each", () => {
    const entries = publicPackages.map((pkg) => ({ name: pkg.name, file: join(project, "node_modules", ...pkg.name.split("/"), ...(pkg.kind === "native" ? ["index.d.ts"] : ["dist", "index.d.ts"])) }));
    const program = ts.createProgram(
      entries.map((e) => e.file),
      { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, skipLibCheck: true, noEmit: true },
    );
    const checker = program.getTypeChecker();
    const declared = new Map<string, Map<string, string>>();
    for (const entry of entries) {
      const source = program.getSourceFile(entry.file);
      expect(source, entry.file).toBeDefined();
      const module = checker.getSymbolAtLocation(source!)!;
      for (const exported of checker.getExportsOfModule(module)) {
        const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
        const declaration = target.declarations?.[0];
        const where = declaration ? `${declaration.getSourceFile().fileName.replace(/^.*node_modules\//, "")}#${target.name}` : "?";
        if (!declared.has(exported.name)) declared.set(exported.name, new Map());
        declared.get(exported.name)!.set(entry.name, where);
      }
    }
    const twice = [...declared].filter(([, by]) => new Set(by.values()).size > 1).map(([name, by]) => `${name}: ${JSON.stringify(Object.fromEntries(by))}`);
    expect(twice).toEqual([]);
    expect(declared.size).toBeGreaterThan(100);
  });
});
