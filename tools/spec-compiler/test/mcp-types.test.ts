// The MCP types the codec names, spelled out from the SDK's declarations by the checker.
import { describe, expect, it } from "vitest";
import { mcpTypeSource } from "../src/emit/mcp-types.js";

describe("mcpTypeSource", () => {
  it("writes a type out in full, a member of one too, naming nothing of the SDK", () => {
    const { sdkVersion, types } = mcpTypeSource([{ schema: "JSONRPCErrorResponseSchema", member: "error" }, { schema: "CallToolRequestParamsSchema" }]);
    expect(sdkVersion).toMatch(/^\d+\.\d+\.\d+$/);
    expect(types[0]!.replace(/\s+/g, " ")).toBe("{ code: number; message: string; data?: unknown; }");
    expect(types[1]).toMatch(/^\{\n {2}name: string;\n/);
    expect(types[1]).toMatch(/arguments\?: undefined \| \{\n\s+\[key: string\]: unknown;/);
    expect(types.join("\n")).not.toMatch(/\b(z|sdk|Flatten|Infer|import)\b/);
  }, 120_000);

  it("names a type the SDK does not declare", () => {
    expect(() => mcpTypeSource([{ schema: "NoSuchThingSchema" }])).toThrow(/declares no type NoSuchThing/);
  }, 120_000);
});
