// What makes `diverge-proxy` and `diverge connect` operable beside other services: logs as one JSON
// object a line (`--log-format json`), and a health and metrics endpoint on a port the operator
// chooses (`--health <host:port>`): `GET /healthz` (what is connected and begun, 200 when ready, 503
// before) and `GET /metrics` (Prometheus text, by prom-client, from the process's own counters).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, Gauge, Registry } from "prom-client";

export type LogLevel = "info" | "error";

/** Where a run's lines go: `info` for progress lines (those --quiet hides), `error` for the others. */
export interface OpsLog {
  info(line: string): void;
  error(line: string): void;
}

/** `(connection|channel|scope|session|mount|ask) <n>` in a line, as ids of the JSON object. */
const ID = /\b(connection|channel|scope|session|ask|mount)\s+#?(\d+)\b/g;

const STOP_WORDS = new Set(["at", "on", "to", "the", "a", "an", "of", "and", "in", "for", "with", "from", "by"]);

/** The same words for the same happening: the line's head (before its first `: `), without numbers, slashes or quoted parts. */
export function eventOf(line: string): string {
  const head = line.split(/:\s/)[0] ?? line;
  const words = head
    .replace(/\{.*\}|\[.*\]|"[^"]*"|'[^']*'|\([^)]*\)/g, " ")
    .replace(/[a-z]+:\/\/\S+/gi, " ")
    .split(/\s+/)
    .filter((word) => word.length > 0 && !/\d/.test(word))
    .map((word) => word.toLowerCase().replace(/[^a-z0-9_-]+/g, ""))
    .filter((word) => word.length > 0 && !STOP_WORDS.has(word));
  return words.slice(0, 5).join(".") || "log";
}

/**
 * One JSON object for a line: `time` (ISO 8601), `level`, `event` (eventOf), the ids named in the line,
 * and the line itself as `message`. Every value in `secrets` is replaced by `[redacted]` first.
 */
export function jsonLogLine(level: LogLevel, line: string, secrets: readonly string[] = []): string {
  let message = line;
  for (const secret of secrets) if (secret.length > 0) message = message.split(secret).join("[redacted]");
  const ids: Record<string, number> = {};
  for (const match of message.matchAll(ID)) ids[match[1]!] = Number(match[2]);
  return `${JSON.stringify({ time: new Date().toISOString(), level, event: eventOf(message), ...ids, message })}\n`;
}

export interface LogFormatOptions {
  /** "text" (the default: lines as they are) or "json". */
  readonly format: "text" | "json";
  /** Values never to be written (the secrets a run holds); read at every line. */
  readonly secrets?: () => readonly string[];
}

/**
 * The run's log. With "json", every line written to stderr — by this log or by anything else of the
 * process — becomes one JSON object (`error` level unless written with `info`), so nothing leaves as
 * plain text; secrets are redacted from both.
 */
export function useLogFormat(options: LogFormatOptions): OpsLog {
  const write = process.stderr.write.bind(process.stderr) as (text: string) => boolean;
  if (options.format === "text") return { info: (line) => void write(`${line}\n`), error: (line) => void write(`${line}\n`) };
  const secrets = options.secrets ?? (() => []);
  let pending = "";
  const emit = (level: LogLevel, text: string) => {
    for (const line of text.split("\n")) if (line.trim().length > 0) write(jsonLogLine(level, line, secrets()));
  };
  // Whatever else writes to stderr (an error message, a dependency's warning) is turned into objects too.
  (process.stderr as { write: unknown }).write = (chunk: string | Uint8Array, encoding?: unknown, callback?: unknown) => {
    pending += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    const end = pending.lastIndexOf("\n");
    if (end >= 0) {
      emit("error", pending.slice(0, end));
      pending = pending.slice(end + 1);
    }
    const done = typeof encoding === "function" ? encoding : callback;
    if (typeof done === "function") process.nextTick(done as () => void);
    return true;
  };
  process.once("exit", () => pending && emit("error", pending));
  return { info: (line) => emit("info", line), error: (line) => emit("error", line) };
}

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

/** Serves `GET /healthz` (JSON) and `GET /metrics` (Prometheus text) at host:port; anything else is 404. */
export async function serveOps(options: OpsServerOptions): Promise<OpsServer> {
  const registry = opsRegistry(options.metrics);
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const path = (request.url ?? "/").split("?")[0];
    if (request.method !== "GET" && request.method !== "HEAD") {
      response.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
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
