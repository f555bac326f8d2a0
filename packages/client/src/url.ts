// One rule for the proxy's address, shared by openContainer (`/`) and connectProxy (`/requests` and
// the answer paths): the caller gives the proxy's base URL — ws, wss, http or https, with or without
// a trailing slash or a path prefix (a proxy behind a reverse proxy) — and each side adds its own
// endpoint. A path that names one of the proxy's endpoints is refused, since the caller meant another
// transport or another party's endpoint.

/** The first path segments the proxy serves on its provider port; a base URL never ends in one of them. */
const ENDPOINTS = ["requests", "mcp", "tool", "postgres", "vault", "command", "fuse", "filesystem", "agent", "daemon", "register", "secrets"] as const;

export type ProxyUrlErrorDetail =
  /** The text is not a URL. */
  | { readonly variant: "NotAUrl"; readonly url: string }
  /** The scheme is none of ws, wss, http, https. */
  | { readonly variant: "Scheme"; readonly url: string; readonly scheme: string }
  /** The path names one of the proxy's endpoints (e.g. `/requests`) instead of the proxy itself. */
  | { readonly variant: "Endpoint"; readonly url: string; readonly endpoint: string; readonly base: string };

export class ProxyUrlError extends Error {
  override readonly name = "ProxyUrlError";
  constructor(readonly detail: ProxyUrlErrorDetail) {
    super(describe(detail));
  }
  get variant(): ProxyUrlErrorDetail["variant"] {
    return this.detail.variant;
  }
}

function describe(detail: ProxyUrlErrorDetail): string {
  switch (detail.variant) {
    case "NotAUrl":
      return `${JSON.stringify(detail.url)} is not a URL; give the proxy's base URL, e.g. ws://127.0.0.1:14979`;
    case "Scheme":
      return `${detail.url}: the scheme ${detail.scheme} is not ws, wss, http or https`;
    case "Endpoint":
      return `${detail.url} names the proxy's /${detail.endpoint} endpoint; give the proxy's base URL (${detail.base}) and the library picks the endpoint`;
  }
}

/**
 * The proxy's base URL as a WebSocket URL whose path ends in `/`. Throws ProxyUrlError for a text
 * that is not a URL, a scheme other than ws/wss/http/https, or a path naming one of its endpoints.
 */
export function proxyBase(url: string | URL): URL {
  const text = String(url);
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw new ProxyUrlError({ variant: "NotAUrl", url: text });
  }
  const schemes: Record<string, string> = { "ws:": "ws:", "wss:": "wss:", "http:": "ws:", "https:": "wss:" };
  const scheme = schemes[parsed.protocol];
  if (!scheme) throw new ProxyUrlError({ variant: "Scheme", url: text, scheme: parsed.protocol.replace(/:$/, "") });
  const base = new URL(parsed.href);
  base.protocol = scheme;
  base.search = "";
  base.hash = "";
  const segments = base.pathname.split("/").filter((segment) => segment !== "");
  const named = segments.findIndex((segment) => (ENDPOINTS as readonly string[]).includes(segment));
  if (named >= 0) {
    base.pathname = `/${segments.slice(0, named).map((s) => `${s}/`).join("")}`;
    throw new ProxyUrlError({ variant: "Endpoint", url: text, endpoint: segments.slice(named).join("/"), base: base.href });
  }
  base.pathname = `/${segments.map((s) => `${s}/`).join("")}`;
  return base;
}

/** The URL of `endpoint` (no leading slash; "" for the proxy's `/`) under the proxy's base URL. */
export function endpointUrl(base: URL, endpoint: string): string {
  return new URL(endpoint, base).href;
}
