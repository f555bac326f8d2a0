#!/usr/bin/env node
// The size budget: what a consumer's bundle pays, minified by esbuild and gzipped (level 9).
//   node scripts/size.mjs           print the table and write it to SIZES.md
//   node scripts/size.mjs --check   exit 1 when SIZES.md is not what this build measures
// The packages resolve through this package's workspace dependencies, i.e. their built dist/, exactly
// as the packed tarballs hold them. Run after `pnpm build`.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { noNodeBuiltins } from "./no-node-builtins.mjs";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
export const sizesFile = join(packageRoot, "SIZES.md");

/** What each row bundles. Browser rows fail on any Node built-in; the client is a Node package. */
export const rows = [
  { id: "decoder", what: "(a) one frame's decoder", entry: `import { decodePostgresRequest } from "@diverge/codec"`, source: `export { decodePostgresRequest } from "@diverge/codec";`, platform: "browser" },
  { id: "codec", what: "(b) the whole codec, every frame of the newest revision", entry: `import * as codec from "@diverge/codec"`, source: `export * from "@diverge/codec";`, platform: "browser" },
  { id: "client", what: "(c) the client, with its dependencies (Node built-ins external)", entry: `import * as client from "@diverge/client"`, source: `export * from "@diverge/client";`, platform: "node" },
  { id: "mcp", what: "the optional MCP check, with the MCP SDK's zod schemas", entry: `import { checkMcp } from "@diverge/codec/mcp"`, source: `export { checkMcp } from "@diverge/codec/mcp";`, platform: "browser" },
];

/** Bundles one row and returns its minified text. */
export async function bundle(row) {
  const result = await build({
    stdin: { contents: row.source, resolveDir: packageRoot, loader: "js", sourcefile: `${row.id}.js` },
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    platform: row.platform,
    write: false,
    logLevel: "silent",
    legalComments: "none",
    plugins: row.platform === "browser" ? [noNodeBuiltins()] : [],
  });
  return result.outputFiles[0].text;
}

/** Measures every row: minified bytes and gzipped bytes. */
export async function measure() {
  const measured = [];
  for (const row of rows) {
    const text = await bundle(row);
    const bytes = Buffer.from(text);
    measured.push({ ...row, text, minified: bytes.length, gzipped: gzipSync(bytes, { level: 9 }).length });
  }
  return measured;
}

const kib = (n) => `${(n / 1024).toFixed(2)} KiB`;

/** The Markdown table SIZES.md holds. */
export function table(measured) {
  const lines = [
    "| bundle | entry | minified | minified + gzip |",
    "| --- | --- | ---: | ---: |",
    ...measured.map((m) => `| ${m.what} | \`${m.entry}\` | ${m.minified} B (${kib(m.minified)}) | ${m.gzipped} B (${kib(m.gzipped)}) |`),
  ];
  return lines.join("\n");
}

export function document(measured) {
  return [
    "# Bundle sizes",
    "",
    "What a consumer's bundle pays for each entry: bundled and minified by esbuild (pinned in this",
    "package), then gzipped at level 9. Regenerate with `pnpm --filter @diverge/consumer-tests size`",
    "after a change to the codec or the client; `test/size.test.ts` fails while this table is stale.",
    "",
    table(measured),
    "",
  ].join("\n");
}

/**
 * How a fresh measurement differs from SIZES.md. Minified sizes must match to the byte: esbuild is
 * pinned and its output is deterministic for the same input. Gzipped sizes may differ by 2%: they
 * come from the zlib inside Node, whose build (and so its exact deflate output) differs between Node
 * releases, e.g. a developer's Node and CI's.
 */
export function staleness(measured, committedText) {
  const committed = parse(committedText);
  const problems = [];
  for (const m of measured) {
    const c = committed[m.what];
    if (!c) problems.push(`SIZES.md has no row "${m.what}"`);
    else {
      if (c.minified !== m.minified) problems.push(`${m.what}: minified ${m.minified} B, SIZES.md says ${c.minified} B`);
      if (Math.abs(c.gzipped - m.gzipped) > 0.02 * c.gzipped) problems.push(`${m.what}: gzipped ${m.gzipped} B, SIZES.md says ${c.gzipped} B (over 2% apart)`);
    }
  }
  if (Object.keys(committed).length !== measured.length) problems.push(`SIZES.md has ${Object.keys(committed).length} rows, not ${measured.length}`);
  return problems;
}

/** Parses SIZES.md back into { what → { minified, gzipped } }. */
export function parse(text) {
  const sizes = {};
  for (const match of text.matchAll(/^\| (.+?) \| `.*?` \| (\d+) B .*?\| (\d+) B .*?\|$/gm)) {
    sizes[match[1]] = { minified: Number(match[2]), gzipped: Number(match[3]) };
  }
  return sizes;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const measured = await measure();
  const text = document(measured);
  process.stdout.write(`${table(measured)}\n`);
  if (process.argv.includes("--check")) {
    let committed = "";
    try {
      committed = readFileSync(sizesFile, "utf8");
    } catch {}
    const problems = staleness(measured, committed);
    if (problems.length > 0) {
      process.stderr.write(`SIZES.md is stale: run \`pnpm --filter @diverge/consumer-tests size\`\n  ${problems.join("\n  ")}\n`);
      process.exitCode = 1;
    }
  } else {
    writeFileSync(sizesFile, text);
  }
}
