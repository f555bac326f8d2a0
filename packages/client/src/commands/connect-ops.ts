// `diverge connect --log-format json --health <host:port>`: the run's lines as JSON objects (secrets
// redacted), and /healthz + /metrics (@diverge/multiplexer/ops, prom-client) from counters kept here.
import type { PathsConnectionEvent } from "../paths/answering.js";
import type { ProviderHandlers } from "../gen/exchanges.js";
import type { LogEvent, Say } from "@diverge/multiplexer/log";
import type { OpsServer } from "@diverge/multiplexer/ops";

export const connectOpsOptions = {
  "log-format": { type: "string", default: "text" },
  health: { type: "string" },
  "allow-health-host": { type: "string", multiple: true },
} as const;

export const connectOpsUsage = "    [--log-format text|json] [--health <host:port> [--allow-health-host <name>]...]  logs as JSON; /healthz and /metrics";

export const connectOpsHelp = `  --log-format <f>          text (default) or json: every stderr line one JSON object (time, level,
                            event, the ids in it, message; secret values never written); info for
                            progress, error for the rest
  --health <host:port>      serve GET /healthz (200 while the proxy is held: multiplexed connected and
                            begun, paths /requests open; else 503) and GET /metrics (Prometheus text)
  --allow-health-host <name> a Host name (and its Origins) --health accepts besides loopback and the
                            address it is bound to (every local address when 0.0.0.0): a scraper's
                            service name, say (repeatable; "*" accepts any); others get 403`;

type Outcome = "answered" | "declined" | "streamEnded" | "failed";

/** What a run of `diverge connect` holds and has done, for /healthz and /metrics. */
export class ConnectOps {
  readonly startedAt = Date.now();
  multiplexed: "none" | "open" | "ended" = "none";
  begun = false;
  requestsOpen = false;
  readonly asks = new Map<string, number>(); // transport -> count
  readonly outcomes = new Map<Outcome, number>();
  requestsOpened = 0;
  requestsLost = 0;
  errors = 0;
  private server: OpsServer | undefined;
  private log: { info: Say; error: Say } | undefined;

  constructor(
    readonly transport: "multiplexed" | "paths",
    readonly logFormat: "text" | "json",
    private readonly health: { host: string; port: number; allowedHosts?: readonly string[] } | undefined,
  ) {}

  /** Checks the flags: a message for a usage error, or the parsed ops. */
  static parse(values: { "log-format"?: string; health?: string; "allow-health-host"?: string[] }, transport: "multiplexed" | "paths"): ConnectOps | string {
    const format = values["log-format"] ?? "text";
    if (format !== "text" && format !== "json") return `--log-format must be text or json, not ${format}`;
    let health: { host: string; port: number; allowedHosts?: readonly string[] } | undefined;
    if (values.health !== undefined) {
      const match = /^(?:\[([^\]]+)\]|([^:]+)):([0-9]+)$/.exec(values.health);
      if (!match || Number(match[3]) > 65535) return `--health must be <host>:<port>, e.g. 127.0.0.1:9464`;
      health = { host: match[1] ?? match[2]!, port: Number(match[3]), allowedHosts: values["allow-health-host"] };
    } else if (values["allow-health-host"] !== undefined) return "--allow-health-host widens --health, which is not given";
    return new ConnectOps(transport, format, health);
  }

  /**
   * Turns on the run's log (text or JSON; every stderr line from now on in JSON, `secrets` redacted in
   * every form, redact.ts); returns the progress `say` (silent with --quiet). Outside text (a tool's
   * name, an error's message, a path) goes in the fields, never in the message.
   */
  async start(quiet: boolean, secrets: readonly string[]): Promise<Say> {
    const { useLogFormat } = await import("@diverge/multiplexer/log");
    this.log = useLogFormat({ format: this.logFormat, secrets: () => secrets });
    return (line, event) => {
      if (!quiet) this.info(line, event);
    };
  }

  /** A progress line said even with --quiet. */
  info(line: string, event?: LogEvent): void {
    if (this.log) this.log.info(line, event);
    else process.stderr.write(`${line}\n`);
  }

  /** A line of what went wrong (error level), said even with --quiet. */
  error(line: string, event?: LogEvent): void {
    if (this.log) this.log.error(line, event);
    else process.stderr.write(`${line}\n`);
  }

  /** Serves /healthz and /metrics when --health was given; says where (even with --quiet). */
  async serve(): Promise<void> {
    if (!this.health) return;
    const { serveOps } = await import("@diverge/multiplexer/ops");
    this.server = await serveOps({ ...this.health, health: () => this.healthNow(), metrics: this.metrics() });
    this.info(`diverge connect health and metrics at ${this.server.url}/healthz and /metrics`);
  }

  close(): Promise<void> {
    return this.server?.close() ?? Promise.resolve();
  }

  /** Ready while the proxy is held: on multiplexed the connection open and begun, on paths /requests open. */
  healthNow() {
    const ready = this.transport === "multiplexed" ? this.multiplexed === "open" && this.begun : this.requestsOpen;
    return {
      ready,
      status: ready ? "held" : this.multiplexed === "ended" ? "lost" : "connecting",
      transport: this.transport,
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      multiplexed: this.multiplexed,
      begun: this.begun,
      requests: this.requestsOpen ? "open" : "none",
      asks: Object.fromEntries(this.asks),
    };
  }

  private count(transport: string): void {
    this.asks.set(transport, (this.asks.get(transport) ?? 0) + 1);
  }

  private outcome(outcome: Outcome): void {
    this.outcomes.set(outcome, (this.outcomes.get(outcome) ?? 0) + 1);
  }

  /** `onEvent` of /requests, counting what it says before passing it on. */
  pathsEvents(next: (event: PathsConnectionEvent) => void): (event: PathsConnectionEvent) => void {
    return (event) => {
      if (event.type === "requestsOpened") {
        this.requestsOpen = true;
        this.requestsOpened += 1;
      } else if (event.type === "requestsClosed") {
        this.requestsOpen = false;
        if (event.redial) this.requestsLost += 1;
      } else if (event.type === "ask") this.count("paths");
      else if (event.type === "pathEnded") this.outcome(event.outcome);
      else if (event.type === "error") this.errors += 1;
      next(event);
    };
  }

  /** The begin scope's handlers, each ask counted and its outcome too. */
  counting(handlers: ProviderHandlers): ProviderHandlers {
    const wrapped: Record<string, unknown> = {};
    for (const [name, handler] of Object.entries(handlers)) {
      if (typeof handler !== "function") continue;
      wrapped[name] = (...args: unknown[]) => {
        this.count("multiplexed");
        let answer: unknown;
        try {
          answer = (handler as (...a: unknown[]) => unknown)(...args);
        } catch (problem) {
          this.outcome("failed");
          throw problem;
        }
        // Returned as it came (a promise, a value, a stream): only counted once it settles.
        if (answer && typeof (answer as PromiseLike<unknown>).then === "function") {
          (answer as PromiseLike<unknown>).then(() => this.outcome("answered"), () => this.outcome("failed"));
        } else this.outcome("answered");
        return answer;
      };
    }
    return wrapped as ProviderHandlers;
  }

  private metrics() {
    const gauge = (name: string, help: string, read: () => number) => ({ name, help, type: "gauge" as const, read });
    return [
      gauge("diverge_connect_ready", "1 while the proxy is held (see /healthz)", () => (this.healthNow().ready ? 1 : 0)),
      gauge("diverge_connect_multiplexed_open", "1 while the multiplexed connection on / is open", () => (this.multiplexed === "open" ? 1 : 0)),
      gauge("diverge_connect_begun", "1 once the container has begun on /", () => (this.begun ? 1 : 0)),
      gauge("diverge_connect_requests_open", "1 while /requests is held", () => (this.requestsOpen ? 1 : 0)),
      { name: "diverge_connect_asks_total", help: "exchanges the proxy asked, per transport (served)", type: "counter" as const, labelNames: ["transport"], read: () => [...this.asks].map(([transport, n]) => [{ transport }, n] as const) },
      { name: "diverge_connect_answers_total", help: "how the asks ended: answered, declined (refused), streamEnded, failed", type: "counter" as const, labelNames: ["outcome"], read: () => [...this.outcomes].map(([outcome, n]) => [{ outcome }, n] as const) },
      { name: "diverge_connect_requests_opened_total", help: "/requests connections opened", type: "counter" as const, read: () => this.requestsOpened },
      { name: "diverge_connect_requests_dropped_total", help: "/requests connections that ended and were dialled again", type: "counter" as const, read: () => this.requestsLost },
      { name: "diverge_connect_errors_total", help: "errors reported on /requests", type: "counter" as const, read: () => this.errors },
    ];
  }
}
