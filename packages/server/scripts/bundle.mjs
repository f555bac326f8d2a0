#!/usr/bin/env node
// `pnpm --filter @diverge/server bundle` (after `tsc`): the proxy as one file to ship.
//
//   bundle/diverge-proxy.mjs  one minified ESM file with every dependency inside: `node diverge-proxy.mjs …`
//   bundle/diverge-proxy.cjs  the same as CommonJS, the entry Node 20's single-executable builder wants
//   bundle/diverge-proxy      a Node single executable (SEA) of the .cjs, for images without Node
//
//   node scripts/bundle.mjs [--no-sea] [--require-sea] [--out DIR]
//
// The SEA step copies the running `node` binary and injects the .cjs (with V8's code cache for it)
// with postject; where that cannot be done (a Node without SEA support, a platform postject cannot
// write) it says why and leaves the two bundles, unless --require-sea makes that a failure.
//
// Native optional helpers stay outside: `bufferutil` (and `utf-8-validate`) are `require`d by ws in a
// try block, so beside the bundle they are used when installed and the JavaScript fallback runs when
// they are not (always, in the SEA binary, whose `require` reaches only Node's built-in modules).
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const packageDir = resolve(here, "..");
const args = process.argv.slice(2);
const outAt = args.indexOf("--out");
const out = resolve(outAt >= 0 ? args[outAt + 1] : join(packageDir, "bundle"));
const wantSea = !args.includes("--no-sea");
const requireSea = args.includes("--require-sea");
const entry = join(packageDir, "dist", "cli.js");
if (!existsSync(entry)) {
  console.error(`${relative(process.cwd(), entry)} is missing: build first (pnpm --filter @diverge/server build)`);
  process.exit(1);
}
mkdirSync(out, { recursive: true });

/** Optional native helpers of ws: never bundled (they load a .node file from beside themselves). */
const external = ["bufferutil", "utf-8-validate"];
const common = {
  entryPoints: [entry],
  bundle: true,
  platform: "node",
  target: "node20",
  minify: true,
  legalComments: "none",
  external,
  logLevel: "warning",
  // The dynamic imports of the proxy's lazily loaded parts stay lazy: without code splitting esbuild
  // keeps each such module's top-level code in a function it runs on the first import().
};

const mjs = join(out, "diverge-proxy.mjs");
await build({
  ...common,
  format: "esm",
  outfile: mjs,
  // ESM has no `require`; ws's optional `require("bufferutil")` needs one to look beside the bundle.
  banner: { js: 'import{createRequire as __divergeRequire}from"node:module";const require=__divergeRequire(import.meta.url);' },
});
const cjs = join(out, "diverge-proxy.cjs");
await build({ ...common, format: "cjs", outfile: cjs });
const size = (file) => `${(statSync(file).size / 1024).toFixed(0)} KB`;
console.log(`wrote ${relative(process.cwd(), mjs)} (${size(mjs)}) and ${relative(process.cwd(), cjs)} (${size(cjs)})`);

if (wantSea) {
  const why = seaUnavailable();
  if (why) {
    console.log(`no single executable: ${why}`);
    if (requireSea) process.exit(1);
  } else {
    try {
      const binary = buildSea(cjs, join(out, process.platform === "win32" ? "diverge-proxy.exe" : "diverge-proxy"));
      console.log(`wrote ${relative(process.cwd(), binary)} (${(statSync(binary).size / 2 ** 20).toFixed(0)} MB, Node ${process.version} inside)`);
    } catch (problem) {
      console.log(`no single executable: ${problem instanceof Error ? problem.message : String(problem)}`);
      if (requireSea) process.exit(1);
    }
  }
}

/** Why this Node cannot make a single executable here, or undefined when it can. */
function seaUnavailable() {
  const [major, minor] = process.versions.node.split(".").map(Number);
  // `--experimental-sea-config` and `useCodeCache` are in Node 20.12 and later.
  if (major < 20 || (major === 20 && minor < 12)) return `Node ${process.version} has no --experimental-sea-config with code cache (20.12 or later)`;
  if (!["linux", "darwin", "win32"].includes(process.platform)) return `postject does not write ${process.platform} executables`;
  return undefined;
}

function buildSea(main, binary) {
  const blob = join(out, "diverge-proxy.blob");
  const config = join(out, "sea-config.json");
  writeFileSync(config, `${JSON.stringify({ main, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true }, null, 2)}\n`);
  execFileSync(process.execPath, ["--experimental-sea-config", config], { stdio: ["ignore", "ignore", "inherit"] });
  rmSync(binary, { force: true });
  copyFileSync(process.execPath, binary);
  chmodSync(binary, 0o755);
  if (process.platform === "darwin") execFileSync("codesign", ["--remove-signature", binary]);
  const postject = createRequire(import.meta.url).resolve("postject/dist/cli.js");
  const macho = process.platform === "darwin" ? ["--macho-segment-name", "NODE_SEA"] : [];
  try {
    // postject (LIEF) warns about ELF note sections it does not name; only a failure's output is shown.
    execFileSync(process.execPath, [postject, binary, "NODE_SEA_BLOB", blob, "--sentinel-fuse", "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2", ...macho], { stdio: "pipe" });
  } catch (problem) {
    rmSync(binary, { force: true });
    throw new Error(`postject failed: ${String(problem.stderr ?? problem.message).trim().split("\n").slice(-3).join(" / ")}`);
  }
  if (process.platform === "darwin") execFileSync("codesign", ["--sign", "-", binary]);
  rmSync(blob);
  rmSync(config);
  return binary;
}
