// The MCP types a revision's frames name, written out in full from the MCP TypeScript SDK's own
// declarations, so the codec's published types need no SDK installed and stay exact: the SDK's
// `CallToolRequestParams` is `Infer<typeof CallToolRequestParamsSchema>`, a zod type the checker
// expands here, property by property, into plain TypeScript (with the SDK's property docs).
//
// The SDK is this compiler's own dependency (pinned), so what is generated depends on nothing else
// and `generate --check` finds a drift when the SDK is bumped.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Project, SymbolFlags, ts, TypeFlags, type Node, type Symbol as MorphSymbol, type Type } from "ts-morph";

export interface McpTypeRequest {
  /** The SDK's schema name, e.g. `CallToolRequestParamsSchema`; the type is its name without `Schema`. */
  readonly schema: string;
  /** A member of that type to take instead of the whole, e.g. `error`. */
  readonly member?: string;
}

export interface McpTypeSource {
  /** The SDK's version, as its package.json says. */
  readonly sdkVersion: string;
  /** The TypeScript text of each requested type, in request order. */
  readonly types: readonly string[];
}

/** Where the SDK's `types.d.ts` is, and its version. */
function locateSdk(): { declarations: string; version: string } {
  const require = createRequire(import.meta.url);
  const runtime = require.resolve("@modelcontextprotocol/sdk/types.js");
  const declarations = runtime.replace(/\.js$/, ".d.ts");
  if (!existsSync(declarations)) throw new Error(`the MCP SDK's declarations are not at ${declarations}`);
  let dir = dirname(runtime);
  for (;;) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest)) {
      const parsed = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version?: string };
      if (parsed.name === "@modelcontextprotocol/sdk" && parsed.version) return { declarations, version: parsed.version };
    }
    const up = dirname(dir);
    if (up === dir) throw new Error("the MCP SDK's package.json was not found");
    dir = up;
  }
}

let cached: { key: string; source: McpTypeSource } | undefined;

/**
 * Expands each requested MCP type from the SDK's declarations into self-contained TypeScript.
 *
 * Type-checking the SDK's declarations (and zod's, which they use) costs about two seconds of CPU,
 * so the result is kept in memory and in the OS temp folder, keyed by everything it depends on: the
 * requests, the SDK's declarations, TypeScript's version and this file.
 */
export function mcpTypeSource(requests: readonly McpTypeRequest[]): McpTypeSource {
  const sdk = locateSdk();
  const key = createHash("sha256")
    .update(JSON.stringify(requests))
    .update("\0")
    .update(readFileSync(sdk.declarations))
    .update("\0")
    .update(ts.version)
    .update("\0")
    .update(readFileSync(fileURLToPath(import.meta.url)))
    .digest("hex");
  if (cached?.key === key) return cached.source;
  const cacheFile = join(tmpdir(), "diverge-spec-cache", `mcp-types-${key}.json`);
  try {
    const source = JSON.parse(readFileSync(cacheFile, "utf8")) as McpTypeSource;
    if (typeof source.sdkVersion === "string" && Array.isArray(source.types) && source.types.length === requests.length) {
      cached = { key, source };
      return source;
    }
  } catch {
    // Not cached yet (or unreadable): expand below.
  }
  const source = expand(sdk, requests);
  cached = { key, source };
  try {
    mkdirSync(dirname(cacheFile), { recursive: true });
    const partial = `${cacheFile}.${process.pid}.tmp`;
    writeFileSync(partial, JSON.stringify(source));
    renameSync(partial, cacheFile);
  } catch {
    // A cache that cannot be written only costs time.
  }
  return source;
}

function expand(sdk: { declarations: string; version: string }, requests: readonly McpTypeRequest[]): McpTypeSource {
  const project = new Project({
    compilerOptions: {
      strict: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
    },
    skipAddingFilesFromTsConfig: true,
  });
  const file = project.addSourceFileAtPath(sdk.declarations);
  project.resolveSourceFileDependencies();
  const checker = project.getTypeChecker().compilerObject;
  const types = requests.map((request) => {
    const name = request.schema.replace(/Schema$/, "");
    const alias = file.getTypeAlias(name) ?? file.getInterface(name);
    if (!alias) throw new Error(`the MCP SDK ${sdk.version} declares no type ${name}`);
    let type = alias.getType();
    if (request.member) {
      const member = type.getProperty(request.member);
      if (!member) throw new Error(`the MCP SDK's ${name} has no member ${request.member}`);
      type = member.getTypeAtLocation(alias);
    }
    return new Printer(alias, checker).print(type, 0);
  });
  return { sdkVersion: sdk.version, types };
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** Writes a checker's type as TypeScript text that names nothing: every object is spelled out. */
class Printer {
  private readonly open = new Set<Type>();
  constructor(
    private readonly at: Node,
    private readonly checker: ts.TypeChecker,
  ) {}

  print(type: Type, depth: number): string {
    const flags = type.getFlags();
    if (flags & TypeFlags.Any) return "any";
    if (flags & TypeFlags.Unknown) return "unknown";
    if (flags & TypeFlags.Never) return "never";
    if (flags & TypeFlags.Void) return "void";
    if (type.isBoolean()) return "boolean";
    if (flags & TypeFlags.String) return "string";
    if (flags & TypeFlags.Number) return "number";
    if (flags & TypeFlags.BigInt) return "bigint";
    if (flags & TypeFlags.Null) return "null";
    if (flags & TypeFlags.Undefined) return "undefined";
    if (flags & TypeFlags.NonPrimitive) return "object";
    if (flags & TypeFlags.ESSymbol) return "symbol";
    if (type.isStringLiteral()) return JSON.stringify(type.getLiteralValue());
    if (type.isNumberLiteral()) return String(type.getLiteralValue());
    if (type.isBooleanLiteral()) return type.getText();
    if (type.isTemplateLiteral()) return type.getText();
    if (type.isUnion()) return this.union(type.getUnionTypes(), depth);
    if (type.isIntersection()) return type.getIntersectionTypes().map((t) => this.wrap(t, depth)).join(" & ");
    if (this.open.has(type)) throw new Error(`the MCP type ${this.at.getText().slice(0, 60)}… is recursive; the printer cannot spell it out`);
    this.open.add(type);
    try {
      if (type.isArray() || type.isReadonlyArray()) {
        const element = type.getArrayElementType() ?? type.getTypeArguments()[0]!;
        return `${type.isReadonlyArray() ? "readonly " : ""}${this.wrap(element, depth)}[]`;
      }
      if (type.isTuple()) return `[${type.getTupleElements().map((t) => this.print(t, depth)).join(", ")}]`;
      if (type.isObject()) return this.object(type, depth);
    } finally {
      this.open.delete(type);
    }
    throw new Error(`the MCP types hold a type the printer cannot spell out: ${type.getText()}`);
  }

  /** A union, with `true | false` written `boolean` where both are members. */
  private union(members: readonly Type[], depth: number): string {
    const hasTrue = members.some((m) => m.isBooleanLiteral() && m.getText() === "true");
    const hasFalse = members.some((m) => m.isBooleanLiteral() && m.getText() === "false");
    const parts: string[] = [];
    for (const member of members) {
      if (hasTrue && hasFalse && member.isBooleanLiteral()) {
        if (!parts.includes("boolean")) parts.push("boolean");
        continue;
      }
      parts.push(this.wrap(member, depth));
    }
    return parts.join(" | ");
  }

  /** The type, in parentheses where it is a union or intersection inside another. */
  private wrap(type: Type, depth: number): string {
    const text = this.print(type, depth);
    return (type.isUnion() && !type.isBoolean()) || type.isIntersection() ? `(${text})` : text;
  }

  private object(type: Type, depth: number): string {
    if (type.getCallSignatures().length > 0 || type.getConstructSignatures().length > 0) {
      throw new Error(`the MCP types hold a function type the printer cannot spell out: ${type.getText()}`);
    }
    const pad = "  ".repeat(depth + 1);
    const lines: string[] = [];
    for (const property of type.getProperties()) lines.push(...this.property(property, depth, pad));
    const stringIndex = type.getStringIndexType();
    if (stringIndex) lines.push(`${pad}[key: string]: ${this.print(stringIndex, depth + 1)};`);
    const numberIndex = type.getNumberIndexType();
    if (numberIndex) lines.push(`${pad}[index: number]: ${this.print(numberIndex, depth + 1)};`);
    if (lines.length === 0) return "{}";
    return `{\n${lines.join("\n")}\n${"  ".repeat(depth)}}`;
  }

  private property(property: MorphSymbol, depth: number, pad: string): string[] {
    const name = property.getName();
    const optional = (property.getFlags() & SymbolFlags.Optional) !== 0;
    const type = property.getTypeAtLocation(this.at);
    const out: string[] = [];
    const doc = ts.displayPartsToString(property.compilerSymbol.getDocumentationComment(this.checker)).trim();
    if (doc) {
      const body = doc.replace(/\*\//g, "*\\/").split("\n");
      out.push(`${pad}/**`, ...body.map((line) => `${pad} *${line ? ` ${line}` : ""}`), `${pad} */`);
    }
    out.push(`${pad}${IDENTIFIER.test(name) ? name : JSON.stringify(name)}${optional ? "?" : ""}: ${this.print(type, depth + 1)};`);
    return out;
  }
}
