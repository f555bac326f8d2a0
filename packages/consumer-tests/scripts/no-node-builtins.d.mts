import type { Plugin } from "esbuild";
export function noNodeBuiltins(): Plugin;
