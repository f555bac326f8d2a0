// PLACEHOLDER, replaced by the multiplexed connection and tools::begin (issue 9).
import type { ProxyContext, ProxyPart } from "../proxy.js";

export interface MultiplexedPart extends ProxyPart {}

export async function attachMultiplexed(_context: ProxyContext): Promise<MultiplexedPart> {
  return { async close() {} };
}
