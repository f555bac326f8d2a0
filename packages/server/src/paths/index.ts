// PLACEHOLDER, replaced by the many-paths transport (issue 4).
import type { ProxyContext, ProxyPart } from "../proxy.js";

export interface PathsPart extends ProxyPart {}

export function attachPaths(_context: ProxyContext): PathsPart {
  return { async close() {} };
}
