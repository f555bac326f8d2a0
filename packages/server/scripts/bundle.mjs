#!/usr/bin/env node
// `pnpm --filter @diverge/server bundle` (after `tsc`): the proxy as one file to ship, with its
// native parts beside it.
//
//   OUT/diverge-proxy.mjs  one minified ESM file with every JavaScript dependency and the FUSE binding inside:
//                          `node diverge-proxy.mjs …` (in two stages: see twoStageEsm below)
//   OUT/diverge-proxy.cjs  the same as CommonJS, the entry Node 20's single-executable builder wants
//   OUT/diverge-proxy      a Node single executable (SEA) of the .cjs, for images without Node
//   OUT/node_modules/      the native packages (src/natives.ts: the FUSE binding, ws's optional
//                          helpers where installed) with their dependencies:
//                          each form finds them beside its own file, wherever it is started from
//
//   node scripts/bundle.mjs [--no-sea] [--require-sea] [--no-natives] [--out DIR]
//
// `pnpm build` runs it with `--no-sea --no-natives --out dist/bundle`: the package ships the two
// bundles, and `diverge-proxy bundle --out DIR` (src/image.ts) copies them from an installed package
// with the natives npm installed there, and makes the executable.
//
// The SEA step copies the running `node` binary and injects the .cjs (with V8's code cache for it)
// with postject; where that cannot be done (a Node without SEA support, a platform postject cannot
// write) it says why and leaves the two bundles, unless --require-sea makes that a failure.
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const packageDir = resolve(here, "..");
const args = process.argv.slice(2);
const outAt = args.indexOf("--out");
const out = resolve(outAt >= 0 ? args[outAt + 1] : join(packageDir, "bundle"));
const wantSea = !args.includes("--no-sea");
const requireSea = args.includes("--require-sea");
const wantNatives = !args.includes("--no-natives");
const entry = join(packageDir, "dist", "cli.js");
if (!existsSync(entry)) {
  console.error(`${relative(process.cwd(), entry)} is missing: build first (pnpm --filter @diverge/server build)`);
  process.exit(1);
}
mkdirSync(out, { recursive: true });
// The list of native packages and the code that carries them and makes the executable: the built package's own.
const { NATIVE_PACKAGES, OPTIONAL_NATIVE_PACKAGES } = await import(pathToFileURL(join(packageDir, "dist", "natives.js")).href);
const { buildSea, carryNatives, reportNatives, SEA_NAME, seaUnavailable } = await import(pathToFileURL(join(packageDir, "dist", "image.js")).href);

/**
 * Native modules are never bundled (they load a .node file from beside themselves): the proxy loads
 * them with a `require` made from its own file's location (src/natives.ts), so they are found in
 * `node_modules/` beside the bundle or the executable; without them a bundle loads the FUSE binding
 * it carries inside itself (carriedFuse below).
 */
const external = [...OPTIONAL_NATIVE_PACKAGES, ...NATIVE_PACKAGES];
const fuseCarried = carriedFuse();
const common = {
  entryPoints: [entry],
  bundle: true,
  platform: "node",
  target: "node20",
  minify: true,
  legalComments: "none",
  external,
  // The FUSE binding inside the bundle too (embeddedFuse below), for a bundle copied alone.
  plugins: fuseCarried ? [fuseCarried.plugin] : [],
  logLevel: "warning",
  // natives.ts reads import.meta.url only where it is there, and __filename otherwise.
  logOverride: { "empty-import-meta": "silent" },
  // In the CommonJS form the dynamic imports of the proxy's lazily loaded parts stay lazy too: without
  // code splitting esbuild keeps each such module's top-level code in a function it runs on the
  // first import() (the whole file is compiled at start, which the SEA's code cache makes cheap).
};

/**
 * The CommonJS bundle's `require`: Node's own modules from the one it is given, anything else (the
 * natives, ws's optional helpers) from the file's own place. In the single executable the given
 * `require` reaches only Node's own modules (and warns when asked for more): there `__filename` is
 * the executable, so `node_modules/` beside it is searched.
 */
const cjsBanner =
  'var require=(r=>{const m=r("node:module");let b;const f=(i)=>m.isBuiltin(i)?r(i):(b??=m.createRequire(__filename))(i);' +
  "f.resolve=(i,o)=>(b??=m.createRequire(__filename)).resolve(i,o);return f})(require);";
/** Where the second stage starts and ends at the end of the ESM bundle: one comment. */
const SECOND_STAGE_OPEN = "/*diverge-proxy second stage\n";
const SECOND_STAGE_CLOSE = "\n*/\n";
const CLOSE_ESCAPED = "*\u0001/";

const mjs = join(out, "diverge-proxy.mjs");
await writeFile(mjs, await twoStageEsm(), { mode: 0o755 });
const cjs = join(out, "diverge-proxy.cjs");
{
  // The banner goes after the "use strict" directive, which must stay the file's first statement.
  const built = await build({ ...common, format: "cjs", outfile: cjs, write: false });
  const text = built.outputFiles[0].text;
  const head = /^(#![^\n]*\n)?("use strict";)?/.exec(text)[0];
  await writeFile(cjs, `${head}${cjsBanner}\n${text.slice(head.length)}`, { mode: 0o755 });
}
const size = (file) => `${(statSync(file).size / 1024).toFixed(0)} KB`;
console.log(`wrote ${relative(process.cwd(), mjs)} (${size(mjs)}) and ${relative(process.cwd(), cjs)} (${size(cjs)})`);
console.log(
  fuseCarried
    ? `carried inside: @diverge/fuse-native with its binding for ${fuseCarried.tuple} (${relative(process.cwd(), fuseCarried.binary)}${fuseCarried.binary3 ? `; libfuse 3: ${relative(process.cwd(), fuseCarried.binary3)}` : "; no libfuse 3 build"})`
    : `carried inside: no FUSE binding (${carriedFuseMissing})`,
);
if (wantNatives) reportNatives(out, carryNatives(out, packageDir), console.log);

if (wantSea) {
  const why = seaUnavailable();
  if (why) {
    console.log(`no single executable: ${why}`);
    if (requireSea) process.exit(1);
  } else {
    try {
      const binary = buildSea(cjs, join(out, SEA_NAME));
      console.log(`wrote ${relative(process.cwd(), binary)} (${(statSync(binary).size / 2 ** 20).toFixed(0)} MB, Node ${process.version} inside)`);
    } catch (problem) {
      console.log(`no single executable: ${problem instanceof Error ? problem.message : String(problem)}`);
      if (requireSea) process.exit(1);
    }
  }
}

/**
 * The FUSE package inside the bundle, so a bundle copied alone mounts: dist/embedded-fuse.js
 * becomes a module holding @diverge/fuse-native's JavaScript and its binary for this platform (the
 * prebuilt one, else the one compiled here). Loaded only when a mount is asked and no
 * node_modules/@diverge/fuse-native is found beside the bundle (families/fuse/mount.ts): the binary
 * is written to a fresh private directory (beside the bundle, else the temporary directory, else
 * /dev/shm: the first where a library can be loaded, as a noexec mount refuses), loaded with
 * process.dlopen and removed at once; Linux keeps a loaded library's pages after its name is gone.
 * fuse-shared-library is not carried: the binding links the system's libfuse.so.2, and only the
 * setup helpers fuse-native re-exports (configure, beforeMount) use that package, never a mount.
 */
let carriedFuseMissing = "";
function carriedFuse() {
  const tuple = `${process.platform}-${process.arch}`;
  let fuseDir;
  try {
    fuseDir = dirname(createRequire(join(packageDir, "package.json")).resolve("@diverge/fuse-native/package.json"));
  } catch {
    carriedFuseMissing = "@diverge/fuse-native is not installed";
    return undefined;
  }
  const binary = [join(fuseDir, "prebuilds", tuple, "node.napi.node"), join(fuseDir, "build", "Release", "fuse.node")].find((file) => existsSync(file));
  if (!binary) {
    carriedFuseMissing = `@diverge/fuse-native has no binary for ${tuple} (build it: pnpm --filter @diverge/fuse-native build)`;
    return undefined;
  }
  // The libfuse 3 build too, when there is one: the bundle then chooses as the package does (libfuse 3
  // where libfuse3.so.3 loads, DIVERGE_FUSE_LIBFUSE=2 or =3 to insist), so it mounts exactly as the
  // workspace build.
  const binary3 = [join(fuseDir, "build", "Release", "fuse3.node"), join(fuseDir, "prebuilds", tuple, "libfuse3", "fuse.node")].find((file) => existsSync(file));
  const index = join(fuseDir, "index.js");
  const embeddedModule = join(packageDir, "dist", "embedded-fuse.js");
  const inFuse = (importer) => importer.startsWith(fuseDir + "/");
  const loader = [
    "// The carried binding: its bytes written where a library may be loaded, loaded, the file removed.",
    'const fs = require("node:fs"), path = require("node:path"), os = require("node:os");',
    'const bytes2 = require("diverge-fuse-binary");',
    binary3 ? 'const bytes3 = require("diverge-fuse-binary3");' : "const bytes3 = undefined;",
    "let binding;",
    "// The package's choice (its index.js): libfuse 3 where it loads unless DIVERGE_FUSE_LIBFUSE=2, an error when =3 and it does not.",
    "module.exports = function loadCarriedBinding() {",
    "  if (binding) return binding;",
    `  if (process.platform + "-" + process.arch !== ${JSON.stringify(tuple)}) throw new Error(${JSON.stringify(`the bundle carries the FUSE binding for ${tuple} only`)} + ", this is " + process.platform + "-" + process.arch + " (put node_modules/@diverge/fuse-native beside the bundle)");`,
    "  const wanted = process.env.DIVERGE_FUSE_LIBFUSE;",
    '  if (wanted !== "2") {',
    "    if (bytes3) {",
    "      try {",
    "        return (binding = load(bytes3));",
    "      } catch (error) {",
    '        if (wanted === "3") throw new Error("@diverge/fuse-native: the libfuse 3 binding does not load: " + error.message);',
    "      }",
    '    } else if (wanted === "3") throw new Error("@diverge/fuse-native: the libfuse 3 binding does not load (the bundle carries none: libfuse3-dev was missing when it was built)");',
    "  }",
    "  return (binding = load(bytes2));",
    "};",
    "function load(bytes) {",
    "  const own = typeof __filename === \"string\" ? path.dirname(__filename) : undefined;",
    '  const tried = [];',
    '  for (const place of [own, os.tmpdir(), "/dev/shm"]) {',
    "    if (!place) continue;",
    "    let dir;",
    "    try {",
    '      dir = fs.mkdtempSync(path.join(place, ".diverge-fuse-"));',
    '      const file = path.join(dir, "fuse.node");',
    "      fs.writeFileSync(file, bytes.default ?? bytes, { mode: 0o700, flag: \"wx\" });",
    "      const loaded = { exports: {} };",
    "      process.dlopen(loaded, file);",
    "      return loaded.exports;",
    "    } catch (error) {",
    '      tried.push(place + ": " + (error && error.message ? error.message : String(error)));',
    "    } finally {",
    "      if (dir) fs.rmSync(dir, { recursive: true, force: true });",
    "    }",
    "  }",
    '  throw new Error("the FUSE binding the bundle carries could not be loaded: " + tried.join("; "));',
    "};",
  ].join("\n");
  const plugin = {
    name: "diverge-carried-fuse",
    setup(b) {
      // Its own namespace, so the package's "type": "module" does not make the CommonJS module an ES one.
      b.onResolve({ filter: /embedded-fuse\.js$/ }, (args) => (resolve(args.resolveDir, args.path) === embeddedModule ? { path: "embedded-fuse", namespace: "diverge-fuse" } : undefined));
      b.onLoad({ filter: /^embedded-fuse$/, namespace: "diverge-fuse" }, () => ({
              contents: [
                "let carried;",
                "// fuse-native's class and its binding, loaded on the first call (a mount with no node_modules/ beside the bundle).",
                `exports.embeddedFuse = () => (carried ??= { Fuse: require(${JSON.stringify(index)}), binding: require("diverge-fuse-binding")() });`,
              ].join("\n"),
              loader: "js",
              resolveDir: dirname(embeddedModule),
      }));
      // Inside fuse-native: its loader of the binding is the carried one, and its setup helpers' package is left out.
      b.onResolve({ filter: /^node-gyp-build$/ }, (args) => (inFuse(args.importer) ? { path: "diverge-fuse-binding", namespace: "diverge-fuse" } : undefined));
      b.onResolve({ filter: /^diverge-fuse-binding$/ }, () => ({ path: "diverge-fuse-binding", namespace: "diverge-fuse" }));
      b.onResolve({ filter: /^fuse-shared-library$/ }, (args) => (inFuse(args.importer) ? { path: "fuse-shared-library", namespace: "diverge-fuse" } : undefined));
      // fuse-native names its own directory (for node-gyp-build, and in a message): the bundle has no
      // such directory, and the second stage of the ES module bundle no __dirname.
      b.onLoad({ filter: /\/index\.js$/ }, (args) =>
        args.path === index ? { contents: `var __dirname = "(inside the bundle)";\n${carriedChoice(readFileSync(index, "utf8"))}`, loader: "js", resolveDir: fuseDir } : undefined,
      );
      b.onResolve({ filter: /^diverge-fuse-binary$/ }, () => ({ path: binary, namespace: "diverge-fuse-binary" }));
      if (binary3) b.onResolve({ filter: /^diverge-fuse-binary3$/ }, () => ({ path: binary3, namespace: "diverge-fuse-binary" }));
      b.onLoad({ filter: /.*/, namespace: "diverge-fuse-binary" }, (args) => ({ contents: readFileSync(args.path), loader: "binary" }));
      b.onLoad({ filter: /^diverge-fuse-binding$/, namespace: "diverge-fuse" }, () => ({ contents: loader, loader: "js", resolveDir: fuseDir }));
      b.onLoad({ filter: /^fuse-shared-library$/, namespace: "diverge-fuse" }, () => ({
        contents: [
          "// Not carried: setting up fuse-shared-library's own libfuse copy is no part of a mount here.",
          'const notCarried = (cb) => process.nextTick(cb || (() => {}), new Error("fuse-shared-library is not carried in the bundle"));',
          "const done = (cb) => process.nextTick(cb || (() => {}), null);",
          "module.exports = { beforeMount: done, beforeUnmount: done, configure: notCarried, unconfigure: notCarried, isConfigured: (cb) => process.nextTick(cb, null, false) };",
        ].join("\n"),
        loader: "js",
      }));
    },
  };
  return { plugin, binary, binary3, tuple };
}

/** The package's own choice of binding (files beside it) made the carried loader's, which chooses among the bytes it carries. */
function carriedChoice(source) {
  const choice = "const binding = loadBinding(process.env.DIVERGE_FUSE_LIBFUSE)";
  if (!source.includes(choice)) throw new Error(`@diverge/fuse-native's index.js no longer chooses its binding with \`${choice}\`: the bundle cannot carry its choice`);
  return source.replace(choice, 'const binding = require("node-gyp-build")()');
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
        // The operating parts (`bundle`, --health, --log-format) are needed by few runs: second stage.
        const operating = ["./image.js", "./ops.js", "@diverge/multiplexer/ops"].includes(args.path);
        if (args.kind !== "dynamic-import" || args.pluginData === "inner" || (args.importer === entry && !operating)) return undefined;
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
          "  // __filename is the bundle's own file, as in a CommonJS module: natives.ts finds node_modules/ beside it.",
          '  const stage = new Function("require", "module", "exports", "__filename", secondStage());',
          '  stage((name) => (Object.prototype.hasOwnProperty.call(shared, name) ? shared[name] : require(name)), module, module.exports, require("node:url").fileURLToPath(import.meta.url));',
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
      plugins: [...common.plugins, stageOnePlugin(shared)],
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
      ...common.plugins,
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

