// Runs the repository's whole vector corpus through the built `diverge-conformance` binary, as any
// other implementation's harness would: one process, JSON lines through its standard streams.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const here = dirname(fileURLToPath(import.meta.url));
const bin = join(here, "..", "dist", "cli.js");
const vectorsDir = join(here, "..", "vectors");

interface Vector {
  name: string;
  input: Record<string, unknown>;
  expect: { value?: unknown; hex?: string; error?: { variant: string; message?: string; messagePrefix?: string } };
}

function run(lines: readonly string[]): string[] {
  const result = spawnSync(process.execPath, [bin], { input: lines.join("\n") + "\n", encoding: "utf8" });
  expect(result.status).toBe(0);
  return result.stdout.split("\n").slice(0, -1);
}

for (const file of readdirSync(vectorsDir).filter((f) => f.endsWith(".jsonl"))) {
  const vectors = readFileSync(join(vectorsDir, file), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Vector);
  describe(`diverge-conformance over vectors/${file}`, () => {
    const replies = run(vectors.map((v) => JSON.stringify(v.input)));
    it("answers every line with exactly one line, in order", () => {
      expect(replies).toHaveLength(vectors.length);
    });
    vectors.forEach((vector, i) => {
      it(vector.name, () => {
        const reply = JSON.parse(replies[i]!);
        if (vector.expect.error) {
          expect(reply.error?.variant).toBe(vector.expect.error.variant);
          if (vector.expect.error.message !== undefined) expect(reply.error.message).toBe(vector.expect.error.message);
          else expect(reply.error.message.startsWith(vector.expect.error.messagePrefix)).toBe(true);
        } else if (vector.expect.hex !== undefined) expect(reply).toEqual({ hex: vector.expect.hex });
        else expect(reply).toEqual({ value: vector.expect.value });
      });
    });
  });
}

describe("diverge-conformance protocol edges", () => {
  it("answers an unknown revision or frame with UnknownFrame, and keeps going", () => {
    const replies = run([
      JSON.stringify({ revision: "9.9.9", frame: "postgres/request", decode: "00000001" }),
      JSON.stringify({ revision: "2.3.0", frame: "no/such/frame", decode: "00" }),
      JSON.stringify({ revision: "2.3.0", frame: "postgres/request", decode: "00000001" }),
    ]).map((l) => JSON.parse(l));
    expect(replies[0].error.variant).toBe("UnknownFrame");
    expect(replies[1].error.variant).toBe("UnknownFrame");
    expect(replies[2]).toEqual({ value: { connection_id: 1 } });
  });
  it("writes JSON compactly with keys in the order given", () => {
    const [reply] = run([
      JSON.stringify({ revision: "2.3.0", frame: "tools-begin/client/channel-request", encode: { variant: "McpCallTool", params: { name: "n", arguments: { b: 1, a: [true, null] } } } }),
    ]);
    const hex = JSON.parse(reply!).hex as string;
    expect(Buffer.from(hex, "hex").toString("utf8")).toBe('\u0005{"name":"n","arguments":{"b":1,"a":[true,null]}}');
  });
  it("refuses an encode view it cannot write", () => {
    const replies = run([
      JSON.stringify({ revision: "2.3.0", frame: "postgres/request", encode: { connection_id: 2 ** 32 } }),
      JSON.stringify({ revision: "2.3.0", frame: "tools-begin/client/channel-request", encode: { variant: "Nope" } }),
    ]).map((l) => JSON.parse(l));
    expect(replies[0].error.variant).toBe("InvalidValue");
    expect(replies[1].error.variant).toBe("InvalidValue");
  });
});

describe("the README documents the vector format every vector uses", () => {
  const readme = readFileSync(join(here, "..", "README.md"), "utf8");
  const vectors = readdirSync(vectorsDir).filter((f) => f.endsWith(".jsonl")).flatMap((f) => readFileSync(join(vectorsDir, f), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Vector));
  it("each expect is exactly one of value, hex or error, and each error gives message or messagePrefix, not both", () => {
    for (const v of vectors) {
      expect(Object.keys(v.expect).length, v.name).toBe(1);
      if (v.expect.error) expect((v.expect.error.message === undefined) !== (v.expect.error.messagePrefix === undefined), v.name).toBe(true);
    }
  });
  it("names every key the vectors carry in expect, messagePrefix included (issue 26 §4)", () => {
    const keys = new Set(vectors.flatMap((v) => [...Object.keys(v.expect), ...Object.keys(v.expect.error ?? {})]));
    expect(keys).toContain("messagePrefix");
    for (const key of keys) expect(readme, key).toMatch(new RegExp("[`\"]" + key + "[`\"]"));
  });
});
