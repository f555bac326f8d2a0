#!/usr/bin/env node
// `pnpm --filter @diverge/server bundle` (after `tsc`): the proxy as one file to ship.
//
//   bundle/diverge-proxy.mjs  one minified ESM file with every dependency inside: `node diverge-proxy.mjs …`
//                             (in two stages: see twoStageEsm below)
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
import { writeFile } from "node:fs/promises";
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

/**
 * Native modules are never bundled (they load a .node file from beside themselves): ws's optional
 * helpers, and the filesystem watcher and FUSE binding, which the proxy loads only when a tree is
 * watched or a mount made (a lone bundle then answers with the reason they cannot load).
 */
const external = ["bufferutil", "utf-8-validate", "@parcel/watcher", "fuse-native"];
const common = {
  entryPoints: [entry],
  bundle: true,
  platform: "node",
  target: "node20",
  minify: true,
  legalComments: "none",
  external,
  logLevel: "warning",
  // In the CommonJS form the dynamic imports of the proxy's lazily loaded parts stay lazy too: without
  // code splitting esbuild keeps each such module's top-level code in a function it runs on the
  // first import() (the whole file is compiled at start, which the SEA's code cache makes cheap).
};

/** Where the second stage starts and ends at the end of the ESM bundle: one comment. */
const SECOND_STAGE_OPEN = "/*diverge-proxy second stage\n";
const SECOND_STAGE_CLOSE = "\n*/\n";
const CLOSE_ESCAPED = "*\u0001/";

const mjs = join(out, "diverge-proxy.mjs");
await writeFile(mjs, await twoStageEsm(), { mode: 0o755 });
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

/**
 * The ESM bundle in two stages, still one file. Node compiles the whole of an ES module before it
 * runs a line of it, and most of the proxy (ws, the MCP SDK, zod, ajv, YAML: ~90% of the bytes) is
 * only needed once a path is first used. So the code every start runs (the CLI, the listeners, the
 * codec) is the module itself, and the code behind the proxy's dynamic `import()`s is a second,
 * CommonJS-shaped bundle carried in a comment at the end of the file, read back from the file and
 * compiled on the first such import. A comment is only skipped over: the first stage compiles ~15%
 * of the bytes. (As a string literal the second stage cost ~4.5 ms more at every start, measured:
 * V8 builds the 550 KB string, unescaping it, before a line runs; the comment costs ~1.5 ms.)
 *
 * The second stage shares the first stage's modules (the codec's classes, the proxy's own modules)
 * rather than holding copies: every module of the first stage it imports is external to it and
 * handed to it as the first stage's namespace object.
 */
async function twoStageEsm() {
  const root = (path) => resolve(packageDir, path);
  const lazyTargets = new Map(); // resolved path -> index
  const lazyRuntime = "diverge-lazy-runtime";
  // Stage one, first pass: which modules it holds, and what its dynamic imports load.
  const stageOnePlugin = (shared) => ({
    name: "diverge-stage-one",
    setup(b) {
      b.onResolve({ filter: /.*/ }, async (args) => {
        // The CLI's own dynamic import (of the proxy, after binding its ports) spares the workspace
        // build Node's module loader before the listening line; in one file it has nothing to spare,
        // so it stays in stage one (esbuild still runs that code only when the import is made).
        if (args.kind !== "dynamic-import" || args.pluginData === "inner" || args.importer === entry) return undefined;
        const found = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: "inner" });
        if (found.errors.length > 0) return { errors: found.errors };
        // A native module left out stays a run-time import(), made only when that code runs.
        if (found.external) return { path: args.path, external: true };
        if (!lazyTargets.has(found.path)) lazyTargets.set(found.path, lazyTargets.size);
        return { path: String(lazyTargets.get(found.path)), namespace: "diverge-lazy" };
      });
      b.onResolve({ filter: new RegExp(`^${lazyRuntime}$`) }, () => ({ path: lazyRuntime, namespace: "diverge-lazy-runtime" }));
      // The CLI runs for its effect; the package's `"sideEffects": false` is about its library entry.
      b.onResolve({ filter: /.*/ }, (args) => (args.importer === "entry" && args.path === entry ? { path: entry, sideEffects: true } : undefined));
      b.onLoad({ filter: /.*/, namespace: "diverge-lazy" }, (args) => ({
        contents: `const { lazy } = require(${JSON.stringify(lazyRuntime)});\nmodule.exports = lazy()[${JSON.stringify(`m${args.path}`)}];\n`,
        loader: "js",
        resolveDir: packageDir,
      }));
      b.onLoad({ filter: /.*/, namespace: "diverge-lazy-runtime" }, () => ({
        contents: [
          "let shared, loaded;",
          "// The second stage's text: the comment that ends this file, its `*/`s given back.",
          "function secondStage() {",
          '  const text = require("node:fs").readFileSync(new URL(import.meta.url), "utf8");',
          `  const from = text.lastIndexOf(${JSON.stringify(SECOND_STAGE_OPEN)});`,
          `  const to = text.lastIndexOf(${JSON.stringify(SECOND_STAGE_CLOSE)});`,
          '  if (from < 0 || to < from) throw new Error("diverge-proxy: the second stage is missing from the end of " + import.meta.url);',
          `  return text.slice(from + ${SECOND_STAGE_OPEN.length}, to).replaceAll(${JSON.stringify(CLOSE_ESCAPED)}, "*/");`,
          "}",
          "export function share(table) { shared = table; }",
          "// The second stage, compiled on first use; `require` gives it the first stage's modules by key, Node's own by name.",
          "export function lazy() {",
          "  if (loaded) return loaded;",
          '  if (!shared) throw new Error("diverge-proxy: the second stage was asked for before the first had started");',
          "  const module = { exports: {} };",
          '  const stage = new Function("require", "module", "exports", secondStage());',
          "  stage((name) => (Object.prototype.hasOwnProperty.call(shared, name) ? shared[name] : require(name)), module, module.exports);",
          "  return (loaded = module.exports);",
          "}",
        ].join("\n"),
        loader: "js",
        resolveDir: packageDir,
      }));
      // The entry: the first stage's modules the second imports, by key, then the CLI.
      b.onResolve({ filter: /^diverge-entry$/ }, () => ({ path: "entry", namespace: "diverge-entry" }));
      b.onLoad({ filter: /.*/, namespace: "diverge-entry" }, () => ({
        contents: [
          `import { share } from ${JSON.stringify(lazyRuntime)};`,
          ...[...shared].map(([path, key], i) => `import * as s${i} from ${JSON.stringify(path)};`),
          `share({ ${[...shared].map(([, key], i) => `${JSON.stringify(key)}: s${i}`).join(", ")} });`,
          `import ${JSON.stringify(entry)};`,
        ].join("\n"),
        loader: "js",
        resolveDir: packageDir,
      }));
    },
  });
  const stageOne = (shared) =>
    build({
      ...common,
      entryPoints: ["diverge-entry"],
      format: "esm",
      write: false,
      metafile: true,
      outfile: join(out, "stage-one.mjs"),
      banner: { js: '#!/usr/bin/env node\nimport{createRequire as __divergeRequire}from"node:module";const require=__divergeRequire(import.meta.url);' },
      plugins: [stageOnePlugin(shared)],
    });
  const first = await stageOne(new Map());
  const inStageOne = new Set(Object.keys(first.metafile.inputs).map((input) => root(input)));
  // Stage two: every target of a dynamic import, with whatever stage one holds left external.
  const shared = new Map(); // path -> key
  const second = await build({
    ...common,
    entryPoints: ["diverge-second-stage"],
    format: "cjs",
    write: false,
    outfile: join(out, "stage-two.cjs"),
    plugins: [
      {
        name: "diverge-stage-two",
        setup(b) {
          b.onResolve({ filter: /^diverge-second-stage$/ }, () => ({ path: "entry", namespace: "diverge-second-stage" }));
          b.onLoad({ filter: /.*/, namespace: "diverge-second-stage" }, () => ({
            contents: [...lazyTargets].map(([path, i]) => `export * as m${i} from ${JSON.stringify(path)};`).join("\n"),
            loader: "js",
            resolveDir: packageDir,
          }));
          b.onResolve({ filter: /.*/ }, async (args) => {
            if (args.pluginData === "inner" || args.namespace === "diverge-second-stage" || args.kind === "entry-point") return undefined;
            const found = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: "inner" });
            if (found.errors.length > 0 || found.external || !inStageOne.has(found.path)) return undefined;
            if (!shared.has(found.path)) shared.set(found.path, `diverge-stage-one:${shared.size}`);
            return { path: shared.get(found.path), external: true };
          });
        },
      },
    ],
  });
  // Stage one again, now sharing what stage two imports of it.
  const final = await stageOne(shared);
  const firstStage = final.outputFiles[0].text;
  const code = second.outputFiles[0].text;
  // A `*/` inside the second stage (in a string or a regular expression) would end the comment: each
  // is written with a U+0001 between its two characters, which the code never holds, and read back.
  if (code.includes("\u0001")) throw new Error("the second stage holds U+0001, which its comment uses to escape */");
  // The markers are looked for from the end, so the first stage's own copies of them (in the code
  // that reads the comment back) come before and are never taken for it.
  return `${firstStage.trimEnd()}\n${SECOND_STAGE_OPEN}${code.replaceAll("*/", CLOSE_ESCAPED)}${SECOND_STAGE_CLOSE}`;
}

