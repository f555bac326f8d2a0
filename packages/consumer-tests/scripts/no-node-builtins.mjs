// An esbuild plugin that fails the build when anything imports a Node built-in (`fs`, `node:fs`,
// `fs/promises`, ...), naming the importer. esbuild's platform "browser" would already fail to resolve
// most of them, but a package's `browser` field can quietly stub one out; this catches every case.
import { builtinModules } from "node:module";

const builtins = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]));

/** @returns {import("esbuild").Plugin} */
export function noNodeBuiltins() {
  return {
    name: "no-node-builtins",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (!builtins.has(args.path) && !args.path.startsWith("node:")) return undefined;
        return { errors: [{ text: `${args.importer || "<entry>"} imports the Node built-in "${args.path}"` }] };
      });
    },
  };
}
