// The size budget: one decoder costs only itself (tree-shaking works through the package's
// `sideEffects: false` and the generated modules' shape), the codec stays within its budget, no
// browser bundle pulls in a Node built-in, and SIZES.md is the table this build measures.
import { readFileSync } from "node:fs";
import { stop } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundle, measure, sizesFile, staleness, type Measured } from "../scripts/size.mjs";

let measured: Measured[];
const row = (id: string): Measured => measured.find((m) => m.id === id)!;

beforeAll(async () => {
  measured = await measure();
});

afterAll(async () => {
  // esbuild's service process would otherwise keep this worker alive.
  await stop();
});

describe("tree-shaking", () => {
  it("bundles one frame's decoder without any other frame", () => {
    const decoder = row("decoder").text;
    const codec = row("codec").text;
    // Every frame's error class carries its name as a string that minification keeps.
    const errorNames = (text: string) => [...text.matchAll(/name="(\w+Error)"/g)].map((m) => m[1]);
    expect(errorNames(codec).length).toBeGreaterThan(5);
    expect(errorNames(decoder)).toEqual(["PostgresRequestError"]);
    for (const otherFrameText of ["unknown mcp answer frame tag", "daemon", "vault", "secrets"]) {
      expect(codec.toLowerCase()).toContain(otherFrameText);
      expect(decoder.toLowerCase()).not.toContain(otherFrameText);
    }
  });

  it("keeps one decoder under 1 KiB gzipped, and a small fraction of the codec", () => {
    expect(row("decoder").gzipped).toBeLessThanOrEqual(1024);
    expect(row("decoder").minified * 20).toBeLessThan(row("codec").minified);
  });

  // 16 KiB until the agent family (agents::begin, its channels, the chunk JSON and its checks, /agent/*)
  // joined the spec: about 5 KiB more for some 25 frames.
  it("keeps the whole codec within its budget of 22 KiB gzipped", () => {
    expect(row("codec").gzipped).toBeLessThanOrEqual(22 * 1024);
  });
});

describe("Node built-ins in browser bundles", () => {
  it("fails the build when anything imports one, with or without node:", async () => {
    for (const source of [`import "node:fs";`, `import { join } from "path"; export { join };`, `import "fs/promises";`]) {
      await expect(bundle({ id: "bad", source, platform: "browser" })).rejects.toThrow(/imports the Node built-in/);
    }
  });

  it("builds every browser row without one", () => {
    expect(measured.filter((m) => m.platform === "browser").map((m) => m.id)).toEqual(["decoder", "codec", "mcp"]);
  });
});

it("SIZES.md is the table this build measures (run `pnpm --filter @diverge/consumer-tests size`)", () => {
  expect(staleness(measured, readFileSync(sizesFile, "utf8"))).toEqual([]);
});
