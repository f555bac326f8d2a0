// The proxy's native packages, named in this one place: the bundle (scripts/bundle.mjs and
// `diverge-proxy bundle`) leaves each outside and carries it beside itself in `node_modules/`, and
// the families load each through `requireNative`, which resolves from the file the proxy runs from
// (dist/natives.js, the bundle `diverge-proxy.mjs`/`.cjs`, or the single executable) — never from
// the working directory.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/**
 * The FUSE binding of `fuse::mount` (families/fuse/mount.ts loads it by this name): this repository's
 * packages/fuse-native, fuse-native 2.2.6 with its fixes (one time alone, nanoseconds) and a
 * prebuilt linux-x64 binary, so a registry install gets the same binding as this workspace.
 */
export const FUSE_PACKAGE = "@diverge/fuse-native";
/**
 * What a mount needs at run time: the bundle carries each beside itself, with its dependencies. (A
 * tree needs none: it watches with Node's own inotify watches.)
 */
export const NATIVE_PACKAGES: readonly string[] = [FUSE_PACKAGE];
/** ws's optional native helpers: used when found beside the bundle, else ws's JavaScript code runs. */
export const OPTIONAL_NATIVE_PACKAGES: readonly string[] = ["bufferutil", "utf-8-validate"];

/**
 * The file this code runs from: dist/natives.js of the installed package, the ES module bundle, the
 * CommonJS bundle (`__filename`), or the single executable (whose embedded script's `__filename`
 * is the executable itself).
 */
export function ownFile(): string {
  const url = import.meta.url as string | undefined; // empty in the CommonJS bundle
  if (typeof url === "string" && url.startsWith("file:")) return fileURLToPath(url);
  if (typeof __filename === "string") return __filename;
  return process.execPath;
}

let requireHere: NodeRequire | undefined;
/** `require` from the file the proxy runs from: finds `node_modules/` beside the bundle or the executable. */
export function requireNative<T = unknown>(id: string): T {
  return (requireHere ??= createRequire(ownFile()))(id) as T;
}
/** Where `requireNative(id)` finds `id`. */
export function resolveNative(id: string): string {
  return (requireHere ??= createRequire(ownFile())).resolve(id);
}
