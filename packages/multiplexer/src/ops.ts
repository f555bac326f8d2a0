// What makes `diverge-proxy` and `diverge connect` operable beside other services: logs as one JSON
// object a line (`--log-format json`), and a health and metrics endpoint on a port the operator
// chooses (`--health <host:port>`): `GET /healthz` (what is connected and begun, 200 when ready, 503
// before) and `GET /metrics` (Prometheus text, by prom-client, from the process's own counters).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname, networkInterfaces } from "node:os";
import { guardRefusal, type HostGuard } from "./guard.js";
import { Counter, Gauge, Registry } from "prom-client";

export * from "./log.js";

/** One metric read from the process's counters at every scrape. */
export interface OpsMetric {
  readonly name: string;
  readonly help: string;
  /** "counter": only grows (a `_total`); "gauge": what is so now. */
  readonly type: "counter" | "gauge";
  readonly labelNames?: readonly string[];
  /** The value now, or one value per label set. */
  readonly read: () => number | readonly (readonly [Record<string, string>, number])[];
}

export interface Health {
  /** Whether the process does its job now: /healthz answers 200 when it does, 503 while it does not. */
  readonly ready: boolean;
  readonly [key: string]: unknown;
}

export interface OpsServerOptions {
  readonly host: string;
  readonly port: number;
  readonly health: () => Health;
  readonly metrics: readonly OpsMetric[];
  /** Host names (`name` or `[v6]`) accepted in `Host` and `Origin` besides loopback and the bound host; `"*"` accepts any. */
  readonly allowedHosts?: readonly string[];
}

export interface OpsServer {
  readonly port: number;
  /** `http://host:port` */
  readonly url: string;
  close(): Promise<void>;
}

/** The metrics as a prom-client registry, each read from `metric.read` at every scrape. */
export function opsRegistry(metrics: readonly OpsMetric[]): Registry {
  const registry = new Registry();
  for (const metric of metrics) {
    const config = { name: metric.name, help: metric.help, labelNames: [...(metric.labelNames ?? [])], registers: [registry] };
    if (metric.type === "gauge") {
      new Gauge({
        ...config,
        collect() {
          this.reset();
          const value = metric.read();
          if (typeof value === "number") this.set(value);
          else for (const [labels, n] of value) this.set(labels, n);
        },
      });
    } else {
      new Counter({
        ...config,
        collect() {
          this.reset();
          const value = metric.read();
          if (typeof value === "number") this.inc(value);
          else for (const [labels, n] of value) this.inc(labels, n);
        },
      });
    }
  }
  return registry;
}

/** The names a request to a server bound at `host` may carry in `Host`: the bound host, or each local address when bound to all. */
export function boundHostNames(host: string): string[] {
  const bracket = (address: string) => (address.includes(":") ? `[${address}]` : address);
  if (host !== "0.0.0.0" && host !== "::" && host !== "[::]") return [bracket(host)];
  // Bound to every interface: the addresses it is reached at (IP literals, which no DNS rebinding can
  // name), and the machine's own name, as a scraper on another machine would write them.
  const addresses = Object.values(networkInterfaces()).flatMap((entries) => (entries ?? []).map((entry) => bracket(entry.address.split("%")[0]!)));
  return [...new Set([...addresses, hostname()])];
}

/**
 * Serves `GET /healthz` (JSON) and `GET /metrics` (Prometheus text) at host:port; anything else is
 * 404. Refused before any route: a `Host` or `Origin` that is neither loopback nor the bound host
 * (nor `allowedHosts`) with 403, as DNS rebinding would bring a web page here; a method other than
 * GET or HEAD with 405; a request with a body (none is read) with 413, the connection then closed.
 */
export async function serveOps(options: OpsServerOptions): Promise<OpsServer> {
  const registry = opsRegistry(options.metrics);
  let guard: HostGuard = { hosts: [], origins: [] };
  const server = createServer({ headersTimeout: 10_000, requestTimeout: 10_000, maxHeaderSize: 8192 }, (request: IncomingMessage, response: ServerResponse) => {
    const refused = (status: number, text: string, headers: Record<string, string> = {}) => {
      response.shouldKeepAlive = false;
      response.writeHead(status, { "content-type": "text/plain", connection: "close", ...headers }).end(`${text}\n`);
    };
    const denied = guardRefusal(guard, request.headers);
    if (denied) return refused(403, `${denied}: the health endpoint answers loopback and its bound host only`);
    if (request.method !== "GET" && request.method !== "HEAD") return refused(405, `${request.method} is not served: GET /healthz or /metrics`, { allow: "GET, HEAD" });
    const length = request.headers["content-length"];
    if ((length !== undefined && length !== "0") || request.headers["transfer-encoding"] !== undefined) {
      return refused(413, "a request to the health endpoint carries no body");
    }
    const path = (request.url ?? "/").split("?")[0];
    if (path === "/healthz") {
      let health: Health;
      try {
        health = options.health();
      } catch (problem) {
        health = { ready: false, error: (problem as Error).message };
      }
      response.writeHead(health.ready ? 200 : 503, { "content-type": "application/json" }).end(`${JSON.stringify(health)}\n`);
    } else if (path === "/metrics") {
      registry.metrics().then(
        (text) => response.writeHead(200, { "content-type": registry.contentType }).end(text),
        (problem: Error) => response.writeHead(500, { "content-type": "text/plain" }).end(`${problem.message}\n`),
      );
    } else response.writeHead(404, { "content-type": "text/plain" }).end("not found: GET /healthz or /metrics\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const hosts = [...boundHostNames(options.host), ...(options.allowedHosts ?? [])];
  guard = { hosts, origins: hosts.includes("*") ? ["*"] : hosts.flatMap((name) => [`http://${name}:${port}`, `https://${name}:${port}`]) };
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  return {
    port,
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** `host:port` (`[::1]:9100` for IPv6), or undefined when it is not one. */
export function parseOpsAddress(text: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(text);
  if (!match) return undefined;
  const port = Number(match[3]);
  if (port > 65535) return undefined;
  return { host: match[1] ?? match[2]!, port };
}
