// The container's own MCP server on the paths transport (`/tool/*`, paths.md §4): the generated
// path asks bound onto the path engine, read as MCP results or errors. Each opening is one exchange;
// nothing is asked again.
import type { CallToolRequestParams, PaginatedRequestParams, ReadResourceRequestParams } from "@diverge/codec";
import type { CallToolResult, ListResourcesResult, ListToolsResult, ReadResourceResult, ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { openedPaths, type OpenedPathDescriptor } from "@diverge/codec/exchanges";
import { bindProviderPathAsks, type ProviderPathAsks } from "../../gen/exchanges.js";
import { pathAskEngine, type PathAskEngine, type PathAskEngineOptions, type PathOutcome } from "../../exchanges/paths.js";
import { relayedAnswer, type RelayedAnswer, type RelayedMethod } from "./relayed.js";
import type { ErrorData } from "../../multiplexed/errors.js";

export type ToolPathErrorDetail =
  /** The container's MCP server answered with an error (relayed verbatim by the proxy). */
  | { readonly variant: "Mcp"; readonly path: string; readonly error: ErrorData }
  /** The proxy closed the path with no answer. */
  | { readonly variant: "NotServed"; readonly path: string }
  /** The path ended abruptly before the answer. */
  | { readonly variant: "Lost"; readonly path: string }
  /** The path could not be opened. */
  | { readonly variant: "Refused"; readonly path: string; readonly status: number | undefined; readonly reason: string }
  | { readonly variant: "Unreadable"; readonly path: string; readonly reason: string };

export class ToolPathError extends Error {
  override readonly name = "ToolPathError";
  constructor(readonly detail: ToolPathErrorDetail) {
    super(describe(detail));
  }
}

function describe(detail: ToolPathErrorDetail): string {
  switch (detail.variant) {
    case "Mcp":
      return `${detail.path}: MCP error ${detail.error.code}: ${detail.error.message}`;
    case "NotServed":
      return `the proxy could not serve ${detail.path}`;
    case "Lost":
      return `${detail.path} ended without a close`;
    case "Refused":
      return `${detail.path}: could not open${detail.status ? ` (HTTP ${detail.status})` : ""}: ${detail.reason}`;
    case "Unreadable":
      return `${detail.path}: unreadable answer: ${detail.reason}`;
  }
}

type Answer<R> = { readonly variant: "Result"; readonly result: unknown } | { readonly variant: "Error"; readonly error: unknown };

function resultOf<R>(path: string, outcome: PathOutcome<Answer<R>>): R {
  switch (outcome.type) {
    case "answered":
      if (outcome.answer.variant === "Error") throw new ToolPathError({ variant: "Mcp", path, error: outcome.answer.error as ErrorData });
      return outcome.answer.result as R;
    case "notServed":
      throw new ToolPathError({ variant: "NotServed", path });
    case "lost":
      throw new ToolPathError({ variant: "Lost", path });
    case "refused":
      throw new ToolPathError({ variant: "Refused", path, status: outcome.status, reason: outcome.reason });
    case "unreadable":
      throw new ToolPathError({ variant: "Unreadable", path, reason: outcome.reason });
  }
}

/** The container's MCP server through the proxy at `url`'s `/tool/*` paths. */
export class PathsTools {
  private readonly asks: ProviderPathAsks;
  private readonly engine: PathAskEngine;

  constructor(url: string | URL, options: PathAskEngineOptions = {}) {
    this.engine = pathAskEngine(url, options);
    this.asks = bindProviderPathAsks(this.engine);
  }

  /**
   * The lean relay of `method` (what --serve-tools does with an agent's request): `params` as the agent
   * sent them, the result as the JSON bytes the proxy sent, neither read into MCP's types. Rejects as
   * the typed methods do (ToolPathError; `Mcp` for the server's own error).
   */
  async relay(method: RelayedMethod, params: Record<string, unknown> | undefined, options?: { signal?: AbortSignal }): Promise<Uint8Array> {
    const p = openedPaths;
    const path = method === "tools/call" ? p.ToolCallTool : method === "tools/list" ? p.ToolListTools : method === "resources/list" ? p.ToolListResources : p.ToolReadResource;
    const request = method === "tools/list" || method === "resources/list" ? { params: params ?? null } : { params };
    const lean: OpenedPathDescriptor<unknown, RelayedAnswer> = { ...(path as OpenedPathDescriptor<unknown, unknown>), answer: relayedAnswer(path.answer) };
    return resultOf<Uint8Array>(path.path, await this.engine.one(lean, request, options));
  }

  async listTools(params?: PaginatedRequestParams, options?: { signal?: AbortSignal }): Promise<ListToolsResult> {
    return resultOf("/tool/list-tools", await this.asks.toolListTools({ params: params ?? null }, options));
  }

  async listResources(params?: PaginatedRequestParams, options?: { signal?: AbortSignal }): Promise<ListResourcesResult> {
    return resultOf("/tool/list-resources", await this.asks.toolListResources({ params: params ?? null }, options));
  }

  async callTool(params: CallToolRequestParams, options?: { signal?: AbortSignal }): Promise<CallToolResult> {
    return resultOf("/tool/call-tool", await this.asks.toolCallTool({ params }, options));
  }

  async readResource(params: ReadResourceRequestParams, options?: { signal?: AbortSignal }): Promise<ReadResourceResult> {
    return resultOf("/tool/read-resource", await this.asks.toolReadResource({ params }, options));
  }

  /** What the container's server sends from now on; the loop throws ToolPathError when the path ends otherwise than by `close()`. */
  notifications(): AsyncIterable<ServerNotification> & { close(): void } {
    const stream = this.asks.toolNotifications();
    const path = "/tool/notifications";
    return {
      close: () => stream.close(),
      async *[Symbol.asyncIterator]() {
        for await (const message of stream) {
          if (message.variant === "Error") throw new ToolPathError({ variant: "Mcp", path, error: message.error as ErrorData });
          yield message.notification as ServerNotification;
        }
        const ended = await stream.ended;
        if (ended.type === "done") return;
        if (ended.type === "notServed") throw new ToolPathError({ variant: "NotServed", path });
        if (ended.type === "lost") throw new ToolPathError({ variant: "Lost", path });
        if (ended.type === "refused") throw new ToolPathError({ variant: "Refused", path, status: ended.status, reason: ended.reason });
        throw new ToolPathError({ variant: "Unreadable", path, reason: ended.reason });
      },
    };
  }
}

/** Whether `problem` is the proxy's answer that its secrets gate is shut and nobody can feed it (`data.reason` `"secretsGate"`). */
export function isSecretsGateRefusal(problem: unknown): boolean {
  if (!(problem instanceof ToolPathError) || problem.detail.variant !== "Mcp") return false;
  return (problem.detail.error.data as { reason?: unknown } | undefined)?.reason === "secretsGate";
}

/**
 * The paths transport cannot feed secrets: a proxy whose secrets gate is shut answers every `/tool/*`
 * exchange at once with an MCP error naming the gate and `--no-secrets-gate` (while no provider is
 * begun on `/`). Asks once (`tools/list`, bounded by `timeoutMs`) and resolves with the line to say
 * at start when that is so, else undefined (the gate is open, or there is none).
 */
export async function pathsGateWarning(tools: PathsTools, timeoutMs = 10_000): Promise<string | undefined> {
  try {
    await tools.listTools(undefined, { signal: AbortSignal.timeout(timeoutMs) });
    return undefined;
  } catch (problem) {
    if (!isSecretsGateRefusal(problem)) return undefined;
    return "the proxy's secrets gate is shut, and the paths transport cannot feed secrets: every agent request is answered at once with an MCP error saying so; start the proxy with --no-secrets-gate (a program that declares no secrets), or connect with --transport multiplexed and --secret-env NAME";
  }
}
