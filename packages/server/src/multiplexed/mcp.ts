// Inward MCP: the provider's five exchanges relayed to the container's own MCP server with the MCP
// SDK's client over Streamable HTTP. One session for the connection's life, made on first use.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  ErrorCode,
  ListResourcesResultSchema,
  ListToolsResultSchema,
  McpError,
  ReadResourceResultSchema,
  type ServerNotification,
} from "@modelcontextprotocol/sdk/types.js";

/** A JSON-RPC error object, as relayed in a `[1]` answer. */
export interface ErrorData {
  code: number;
  message: string;
  data?: unknown;
}

export type McpOutcome = { readonly result: unknown } | { readonly error: ErrorData };

export type InwardExchange =
  | { readonly method: "tools/list"; readonly params: object | null }
  | { readonly method: "resources/list"; readonly params: object | null }
  | { readonly method: "tools/call"; readonly params: object }
  | { readonly method: "resources/read"; readonly params: object };

const RESULT_SCHEMAS = {
  "tools/list": ListToolsResultSchema,
  "resources/list": ListResourcesResultSchema,
  "tools/call": CallToolResultSchema,
  "resources/read": ReadResourceResultSchema,
} as const;

export class InwardMcp {
  private connecting: Promise<Client> | undefined;
  private readonly listeners = new Set<(notification: ServerNotification) => void>();
  private closed = false;

  constructor(
    private readonly url: URL,
    private readonly log: (line: string) => void,
  ) {}

  /** Relays one exchange; the container's error comes back as itself, anything else as -32603. */
  async exchange(exchange: InwardExchange): Promise<McpOutcome> {
    let client: Client;
    try {
      client = await this.client();
    } catch (error) {
      return { error: unreachable(this.url, error) };
    }
    try {
      const request = exchange.params === null ? { method: exchange.method } : { method: exchange.method, params: exchange.params as Record<string, unknown> };
      const result = await client.request(request as never, RESULT_SCHEMAS[exchange.method] as never);
      return { result };
    } catch (error) {
      return { error: errorDataOf(error) };
    }
  }

  /** Subscribes to the server's notifications; rejects with the error data when it cannot be reached. */
  async subscribe(listener: (notification: ServerNotification) => void): Promise<{ readonly error: ErrorData } | { readonly unsubscribe: () => void }> {
    try {
      await this.client();
    } catch (error) {
      return { error: unreachable(this.url, error) };
    }
    this.listeners.add(listener);
    return { unsubscribe: () => this.listeners.delete(listener) };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    const pending = this.connecting;
    this.connecting = undefined;
    if (pending) await pending.then((client) => client.close()).catch(() => {});
  }

  private client(): Promise<Client> {
    if (this.closed) return Promise.reject(new Error("the proxy is closing"));
    if (!this.connecting) {
      const client = new Client({ name: "diverge-proxy", version: "2.3.0" });
      client.fallbackNotificationHandler = async (notification) => {
        // The JSON-RPC envelope is not part of the notification: `method` and `params` only.
        const { method, params } = notification as { method: string; params?: unknown };
        const bare = (params === undefined ? { method } : { method, params }) as ServerNotification;
        for (const listener of this.listeners) listener(bare);
      };
      const transport = new StreamableHTTPClientTransport(this.url);
      this.connecting = client.connect(transport).then(
        () => {
          this.log(`inward MCP session open at ${this.url.href}`);
          client.onclose = () => {
            // A lost session is made again on the next exchange.
            this.connecting = undefined;
          };
          return client;
        },
        (error: unknown) => {
          this.connecting = undefined;
          throw error;
        },
      );
    }
    return this.connecting;
  }
}

function unreachable(url: URL, error: unknown): ErrorData {
  return { code: ErrorCode.InternalError, message: `the container's MCP server at ${url.href} could not be reached: ${error instanceof Error ? error.message : String(error)}` };
}

const SDK_PREFIX = /^MCP error -?\d+: /;

/** The error as the server sent it: the SDK prefixes its message, which is taken off again. */
export function errorDataOf(error: unknown): ErrorData {
  if (error instanceof McpError) {
    const data: ErrorData = { code: error.code, message: error.message.replace(SDK_PREFIX, "") };
    if (error.data !== undefined) data.data = error.data;
    return data;
  }
  return { code: ErrorCode.InternalError, message: error instanceof Error ? error.message : String(error) };
}
