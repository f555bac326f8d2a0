// What goes into an image beside the proxy's one file: the native packages (natives.ts) copied with
// their dependencies into `node_modules/` beside it, and the single executable made from the
// CommonJS bundle. Used by scripts/bundle.mjs (in this repository, after esbuild) and by
// `diverge-proxy bundle --out DIR` (from an installed package, which ships the two bundles in
// dist/bundle/).
import type { Say } from "@diverge/multiplexer/log";
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { NATIVE_PACKAGES, OPTIONAL_NATIVE_PACKAGES, ownFile } from "./natives.js";

/**
 * The sentinel Node's single-executable support looks for (the same in every Node 20+), put together
 * at run time: this code is inside the bundle it injects, and postject refuses a binary holding the
 * sentinel twice.
 */
const SEA_FUSE = ["NODE", "SEA", "FUSE", "fce680ab2cc467b6e072b8b5df1996b2"].join("_");
export const SEA_NAME = process.platform === "win32" ? "diverge-proxy.exe" : "diverge-proxy";

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  os?: string[];
  cpu?: string[];
}

/** The installed directory of package `name` as Node would find it from `fromDir` (its real path), or undefined. */
function findPackage(name: string, fromDir: string): string | undefined {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return realpathSync(candidate);
    if (dirname(dir) === dir) return undefined;
  }
}

/** npm's rule for `os` and `cpu`: a list of allowed values, or of `!`-refused ones. */
function allows(list: string[] | undefined, value: string): boolean {
  if (!list || list.length === 0) return true;
  if (list.includes(`!${value}`)) return false;
  return list.some((entry) => !entry.startsWith("!")) ? list.includes(value) : true;
}

export interface CarriedPackage {
  readonly name: string;
  readonly version: string;
  /** Where it was copied, relative to the output directory. */
  readonly at: string;
}

/**
 * Copies the native packages (and their dependencies, optional ones where installed) as found from
 * `fromDir` into `out/node_modules`, flat where names do not clash, nested where two versions of one
 * name are needed. Nested `node_modules` and build intermediates are left out.
 */
export function carryNatives(out: string, fromDir: string = dirname(ownFile())): { carried: CarriedPackage[]; missing: string[] } {
  const carried: CarriedPackage[] = [];
  const missing: string[] = [];
  const placed = new Map<string, string>(); // target dir -> source real path
  const queue: { name: string; from: string; under: string; required: boolean }[] = [
    ...NATIVE_PACKAGES.map((name) => ({ name, from: fromDir, under: out, required: true })),
    ...OPTIONAL_NATIVE_PACKAGES.map((name) => ({ name, from: fromDir, under: out, required: false })),
  ];
  while (queue.length > 0) {
    const { name, from, under, required } = queue.shift()!;
    const source = findPackage(name, from);
    if (source === undefined) {
      if (required) missing.push(name);
      continue;
    }
    const manifest = JSON.parse(readFileSync(join(source, "package.json"), "utf8")) as Manifest;
    if (!allows(manifest.os, process.platform) || !allows(manifest.cpu, process.arch)) continue;
    // Flat under the output's node_modules unless that name holds another copy already.
    let target = join(out, "node_modules", name);
    if (placed.has(target) && placed.get(target) !== source) target = join(under, "node_modules", name);
    if (placed.get(target) === source) continue;
    placed.set(target, source);
    rmSync(target, { recursive: true, force: true });
    mkdirSync(dirname(target), { recursive: true });
    cpSync(source, target, {
      recursive: true,
      dereference: true,
      filter: (path) => {
        const inside = relative(source, path).split(sep);
        return inside[0] !== "node_modules" && !inside.includes("obj.target") && !inside.includes(".deps");
      },
    });
    carried.push({ name, version: manifest.version, at: relative(out, target) });
    for (const dependency of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) {
      queue.push({ name: dependency, from: source, under: target, required: false });
    }
  }
  return { carried, missing };
}

/** Why this Node cannot make a single executable here, or undefined when it can. */
export function seaUnavailable(): string | undefined {
  const [major, minor] = process.versions.node.split(".").map(Number) as [number, number];
  // `--experimental-sea-config` and `useCodeCache` are in Node 20.12 and later.
  if (major < 20 || (major === 20 && minor < 12)) return `Node ${process.version} has no --experimental-sea-config with code cache (20.12 or later)`;
  if (!["linux", "darwin", "win32"].includes(process.platform)) return `postject does not write ${process.platform} executables`;
  return undefined;
}

/** postject's CLI, from this package's place or the working directory's project; undefined when neither has it. */
function findPostject(): string | undefined {
  for (const from of [ownFile(), join(process.cwd(), "package.json")]) {
    try {
      return createRequire(from).resolve("postject/dist/cli.js");
    } catch {
      // not installed there
    }
  }
  return undefined;
}

/**
 * Makes the single executable `binary` from the CommonJS bundle `cjs`: the running `node` copied, the
 * bundle (with V8's code cache for it) injected with postject. Throws with the reason when it cannot.
 */
export function buildSea(cjs: string, binary: string): string {
  const why = seaUnavailable();
  if (why) throw new Error(why);
  const postject = findPostject();
  if (!postject) throw new Error("postject is not installed (npm install --save-dev postject@1.0.0-alpha.6)");
  const out = dirname(binary);
  const blob = join(out, "diverge-proxy.blob");
  const config = join(out, "sea-config.json");
  writeFileSync(config, `${JSON.stringify({ main: cjs, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true }, null, 2)}\n`);
  try {
    execFileSync(process.execPath, ["--experimental-sea-config", config], { stdio: ["ignore", "ignore", "inherit"] });
    rmSync(binary, { force: true });
    copyFileSync(process.execPath, binary);
    chmodSync(binary, 0o755);
    if (process.platform === "darwin") execFileSync("codesign", ["--remove-signature", binary]);
    const macho = process.platform === "darwin" ? ["--macho-segment-name", "NODE_SEA"] : [];
    try {
      // postject (LIEF) warns about ELF note sections it does not name; only a failure's output is shown.
      execFileSync(process.execPath, [postject, binary, "NODE_SEA_BLOB", blob, "--sentinel-fuse", SEA_FUSE, ...macho], { stdio: "pipe" });
    } catch (problem) {
      rmSync(binary, { force: true });
      const error = problem as { stderr?: Buffer; message: string };
      throw new Error(`postject failed: ${String(error.stderr ?? error.message).trim().split("\n").slice(-3).join(" / ")}`);
    }
    if (process.platform === "darwin") execFileSync("codesign", ["--sign", "-", binary]);
  } finally {
    rmSync(blob, { force: true });
    rmSync(config, { force: true });
  }
  return binary;
}

export interface ImageOptions {
  /** Where to write: diverge-proxy.mjs, diverge-proxy.cjs, node_modules/ and the single executable. */
  readonly out: string;
  /** `true` makes a missing single executable a failure; `false` makes none. Default: made when it can be. */
  readonly sea?: boolean;
  /** Copy the native packages beside the bundle (default true). */
  readonly natives?: boolean;
  readonly log?: Say;
}

/** The directory holding the shipped diverge-proxy.mjs and .cjs: dist/bundle/ of the package, or the bundle's own directory. */
export function shippedBundleDir(): string {
  const here = dirname(ownFile());
  for (const dir of [join(here, "bundle"), here]) {
    if (existsSync(join(dir, "diverge-proxy.mjs")) && existsSync(join(dir, "diverge-proxy.cjs"))) return dir;
  }
  throw new Error(`no diverge-proxy.mjs and diverge-proxy.cjs in ${join(here, "bundle")}: this installation of @diverge/server ships no bundle`);
}

const size = (file: string) => `${(statSync(file).size / 1024).toFixed(0)} KB`;

/**
 * `diverge-proxy bundle --out DIR`: the two bundles this package ships, the native packages beside
 * them, and the single executable where it can be made. Returns the exit code.
 */
export function writeImage(options: ImageOptions): number {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const out = resolve(options.out);
  const from = shippedBundleDir();
  mkdirSync(out, { recursive: true });
  for (const file of ["diverge-proxy.mjs", "diverge-proxy.cjs"]) {
    if (resolve(from, file) !== join(out, file)) copyFileSync(join(from, file), join(out, file));
    chmodSync(join(out, file), 0o755);
  }
  log(`wrote ${join(out, "diverge-proxy.mjs")} (${size(join(out, "diverge-proxy.mjs"))}) and diverge-proxy.cjs (${size(join(out, "diverge-proxy.cjs"))})`);
  let code = 0;
  if (options.natives !== false) code = reportNatives(out, carryNatives(out), log);
  if (options.sea !== false) {
    try {
      const binary = buildSea(join(out, "diverge-proxy.cjs"), join(out, SEA_NAME));
      log(`wrote ${binary} (${(statSync(binary).size / 2 ** 20).toFixed(0)} MB, Node ${process.version} inside)`);
    } catch (problem) {
      log(`no single executable: ${(problem as Error).message}`);
      if (options.sea === true) return 1;
    }
  }
  return code;
}

/** Says what was carried; a native package that is not installed is named (its family then answers why it cannot serve). */
export function reportNatives(out: string, result: { carried: CarriedPackage[]; missing: string[] }, log: Say): number {
  const top = result.carried.filter((p) => NATIVE_PACKAGES.includes(p.name) || OPTIONAL_NATIVE_PACKAGES.includes(p.name));
  log(`wrote ${join(out, "node_modules")}: ${top.map((p) => `${p.name}@${p.version}`).join(", ")} (${result.carried.length} packages with their dependencies)`);
  for (const name of result.missing) log(`not carried: ${name} is not installed here (its family refuses with the reason)`);
  return 0;
}
