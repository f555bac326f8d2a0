// The Host/Origin check of a loopback HTTP listener (DNS-rebinding protection, MCP's rule for
// Streamable HTTP servers): the proxy's program port and the provider's --serve-tools make the same one.

/** The `Host` names and `Origin`s a loopback listener accepts. */
export interface HostGuard {
  /** Host names (port-agnostic; IPv6 in brackets, `[::1]`) accepted besides the loopback names; `"*"` accepts any. */
  readonly hosts: readonly string[];
  /** Origins (`scheme://host[:port]`) accepted besides loopback ones; `"*"` accepts any. A request without `Origin` is not checked. */
  readonly origins: readonly string[];
}

/** The names a loopback listener always accepts in `Host`, and in an `Origin`'s host. */
export const LOOPBACK_HOSTS: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

/**
 * Why a request must be refused, or undefined when it may pass. MCP's Streamable HTTP transport asks
 * servers to refuse an `Origin` they do not allow, and loopback servers a `Host` that is not theirs.
 * The MCP SDK's own checks are an Express middleware (`hostHeaderValidation`, same rule: the host
 * name, port-agnostic) and deprecated transport options that would cover `/mcp` only; this listener
 * also serves `/daemon` upgrades, so the check is made here, for every path, before any route runs.
 */
export function guardRefusal(guard: HostGuard, headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
  const host = single(headers.host);
  if (!guard.hosts.includes("*")) {
    if (host === undefined) return "Missing Host header";
    // Only `name[:port]`: no userinfo, path or query smuggled in for the URL parser to drop.
    const name = /[@/\\?#\s]/.test(host) ? undefined : hostnameOf(`http://${host}`);
    if (name === undefined || (!LOOPBACK_HOSTS.includes(name) && !guard.hosts.some((allowed) => hostnameOf(`http://${allowed}`) === name))) return `Invalid Host: ${host}`;
  }
  const origin = single(headers.origin);
  if (origin !== undefined && !guard.origins.includes("*")) {
    let allowed = false;
    try {
      const url = new URL(origin);
      allowed = ((url.protocol === "http:" || url.protocol === "https:") && LOOPBACK_HOSTS.includes(url.hostname)) || guard.origins.some((entry) => sameOrigin(entry, url.origin));
    } catch {
      allowed = false;
    }
    if (!allowed) return `Invalid Origin: ${origin}`;
  }
  return undefined;
}

function hostnameOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

function sameOrigin(entry: string, origin: string): boolean {
  try {
    return new URL(entry).origin === origin;
  } catch {
    return false;
  }
}


function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
