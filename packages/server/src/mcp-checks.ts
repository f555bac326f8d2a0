// The MCP schema checks (`checkMcp` of @diverge/codec/mcp, built on the MCP SDK's zod schemas) are
// the largest thing the proxy loads; they are loaded on first use, not at start. Code that decodes
// with them awaits `loadMcpChecks()` before the bytes it checks can arrive (an outward ask is sent
// only once they are loaded; the provider's connection on `/` is accepted only once they are).
import type { TypeCheck } from "@diverge/codec";

let loaded: TypeCheck | undefined;
let loading: Promise<TypeCheck> | undefined;

/** Loads the checks once; every caller gets the same promise. */
export function loadMcpChecks(): Promise<TypeCheck> {
  return (loading ??= import("@diverge/codec/mcp").then(
    (module) => (loaded = module.checkMcp),
    (problem: unknown) => {
      loading = undefined;
      throw problem;
    },
  ));
}

/** `checkMcp`, once `loadMcpChecks()` has resolved; called earlier it is a bug, and says so. */
export const checkMcp: TypeCheck = (typeName, value) => {
  if (!loaded) throw new Error(`the MCP checks were used before they were loaded (checking a ${typeName})`);
  return loaded(typeName, value);
};
