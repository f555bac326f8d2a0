// The provider's side of the multiplexed connection to one container's proxy: the tools::begin
// scope, the asks the provider makes on it, and the connections the proxy announces.
import {
  decodeInfoAnswer,
  decodeMcpCallToolAnswer,
  decodeMcpListResourcesAnswer,
  decodeMcpListToolsAnswer,
  decodeMcpNotificationsAnswer,
  decodeMcpReadResourceAnswer,
  decodeSecretsAnswer,
  decodeToolsBeginResponse,
  decodeToolsBeginServerChannelRequest,
  encodeContainerProxyRequest,
  encodeToolsBeginChannelRequest,
  DecodeError,
  type CallToolRequestParams,
  type PaginatedRequestParams,
  type ReadResourceRequestParams,
  type ToolsBeginChannelRequest,
  type ToolsBeginServerChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { FrameSocket, speakRevision, type Responder, type SpokenRevision, type WebSocketLike } from "@diverge/multiplexer";
import type { CallToolResult, ListResourcesResult, ListToolsResult, ReadResourceResult, ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { WebSocket as NodeWebSocket } from "ws";

/** A JSON-RPC error object as the container's MCP server sent it. */
export interface ErrorData {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

export type ContainerErrorDetail =
  /** The proxy finished the scope or channel with nothing before the finish. */
  | { readonly variant: "NotServed"; readonly what: string }
  /** The begin or the secrets feed was refused; `error` is the refusal's JSON. */
  | { readonly variant: "Refused"; readonly what: string; readonly error: unknown }
  /** The container's MCP server answered with an error. */
  | { readonly variant: "Mcp"; readonly what: string; readonly error: ErrorData }
  /** The connection ended before the answer finished. */
  | { readonly variant: "Lost"; readonly what: string }
  /** The answer's bytes did not decode. */
  | { readonly variant: "Unreadable"; readonly what: string; readonly reason: string }
  /** An ask that needs `Begun` was made before it. */
  | { readonly variant: "NotBegun"; readonly what: string };

export class ContainerError extends Error {
  override readonly name = "ContainerError";
  constructor(readonly detail: ContainerErrorDetail) {
    super(describe(detail));
  }
  get variant(): ContainerErrorDetail["variant"] {
    return this.detail.variant;
  }
}

function describe(detail: ContainerErrorDetail): string {
  switch (detail.variant) {
    case "NotServed":
      return `${detail.what}: not served`;
    case "Refused":
      return `${detail.what}: refused: ${JSON.stringify(detail.error)}`;
    case "Mcp":
      return `${detail.what}: MCP error ${detail.error.code}: ${detail.error.message}`;
    case "Lost":
      return `${detail.what}: the connection ended before the answer`;
    case "Unreadable":
      return `${detail.what}: unreadable answer: ${detail.reason}`;
    case "NotBegun":
      return `${detail.what}: the container has not begun`;
  }
}

/** A connection the proxy announced: a program's database driver or daemon connection. */
export interface AnnouncedConnection {
  readonly kind: "postgres" | "daemon";
  /** The id the proxy minted; the provider's half quotes it. */
  readonly id: number;
  /**
   * Opens the provider's half. `data` receives what the program sent (driver bytes, or one daemon
   * client frame per call); `end` is called once that half finishes (`served` false: the proxy did not
   * know the id) or the connection ends.
   */
  accept(handlers: { data(bytes: Uint8Array): void; end(served: boolean): void }): PairHalf;
  /** Declines the connection: the proxy closes the program's socket. */
  decline(): void;
}

/** The provider's end of an accepted pair. */
export interface PairHalf {
  /** Sends bytes to the program (what the database says, or one daemon server frame). */
  send(bytes: Uint8Array): void;
  /** Ends the proxy's half: the database or daemon closed the connection. */
  end(): void;
  /** Bytes waiting in the connection's send buffer, for backpressure. */
  readonly bufferedAmount: number;
  drained(lowWater: number): Promise<void>;
  /** Stops reading the connection until the returned function is called. */
  pauseIncoming(): () => void;
}

export interface BeginRequest {
  readonly arguments: unknown;
  readonly image?: { readonly name: string; readonly digest: string };
}

export interface DivergeInfo {
  readonly frontMatter: Record<string, unknown>;
  readonly body: string;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface OpenContainerOptions {
  /** The spec revision to speak (see `SPOKEN_REVISIONS`). Default the newest; another is a RevisionError. */
  readonly revision?: string;
  /** The WebSocket implementation; default `ws`. */
  readonly WebSocket?: WebSocketConstructor;
  /** Called for every database connection the proxy announces; without it each is declined. */
  readonly onPostgres?: (connection: AnnouncedConnection) => void;
  /** Called for every daemon connection the proxy announces; without it each is declined. */
  readonly onDaemon?: (connection: AnnouncedConnection) => void;
}

export interface NotificationStream extends AsyncIterable<ServerNotification> {
  /** Stops delivering; the channel itself lives until the proxy finishes it. */
  close(): void;
}

/** Dials the proxy's `/` and resolves once the WebSocket is open. */
export async function openContainer(url: string | URL, options: OpenContainerOptions = {}): Promise<ContainerConnection> {
  speakRevision(options.revision); // refuse a revision not spoken here before dialling
  const Implementation = options.WebSocket ?? (NodeWebSocket as unknown as WebSocketConstructor);
  const socket = new Implementation(String(url));
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve());
    socket.addEventListener("error", (event: { message?: string; error?: Error }) => reject(event.error ?? new Error(event.message ?? `could not connect to ${String(url)}`)));
  });
  return new ContainerConnection(socket, options);
}

export class ContainerConnection {
  readonly frames: FrameSocket;
  private beginScope: number | undefined;
  private readonly endWaiters: (() => void)[] = [];
  private hasEnded = false;
  readonly mcp: McpAsks;
  /** The spec revision this connection speaks. */
  readonly revision: SpokenRevision;

  constructor(socket: WebSocketLike, private readonly options: OpenContainerOptions = {}) {
    this.revision = speakRevision(options.revision);
    this.frames = new FrameSocket(socket, {
      role: "client",
      events: { channel: (responder, payload) => this.onProxyChannel(responder, payload) },
      closed: () => {
        this.hasEnded = true;
        for (const resolve of this.endWaiters.splice(0)) resolve();
      },
    });
    this.mcp = new McpAsks(this);
  }

  /** Resolves when the connection has ended. */
  ended(): Promise<void> {
    if (this.hasEnded) return Promise.resolve();
    return new Promise((resolve) => this.endWaiters.push(resolve));
  }

  /** Opens the tools::begin scope; resolves with the tools the program declared. */
  beginTools(request: BeginRequest): Promise<unknown[]> {
    const what = "tools::begin";
    const begin: Record<string, unknown> = { arguments: request.arguments ?? null };
    if (request.image) begin.image = { name: request.image.name, digest: request.image.digest };
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = (action: () => void) => {
        if (settled) return;
        settled = true;
        action();
      };
      const opened = this.frames.mux.openScope(encodeContainerProxyRequest({ endpoint: "ToolsBegin", begin }), {
        response: (payload) => {
          try {
            const answer = decodeToolsBeginResponse(payload);
            if (answer.variant === "Begun") {
              this.beginScope = opened.scope;
              settle(() => resolve(Array.isArray(answer.tools) ? answer.tools : []));
            } else settle(() => reject(new ContainerError({ variant: "Refused", what, error: answer.error })));
          } catch (error) {
            settle(() => reject(unreadable(what, error)));
          }
        },
        finish: () => settle(() => reject(new ContainerError({ variant: "NotServed", what }))),
        lost: () => settle(() => reject(new ContainerError({ variant: "Lost", what }))),
      });
    });
  }

  /** The container's `DIVERGE.md`, parsed; undefined when the image has none. */
  async info(): Promise<DivergeInfo | undefined> {
    const answer = await this.askOnce("info", { variant: "Info" }, (bytes) => decodeInfoAnswer(bytes));
    return answer.variant === "Info" ? (answer.info as unknown as DivergeInfo) : undefined;
  }

  /** Feeds the secrets' values; resolves on `Fed`, rejects with `Refused` and the program's words. */
  async feedSecrets(values: Record<string, string>): Promise<void> {
    const answer = await this.askOnce("secrets", { variant: "Secrets", values }, (bytes) => decodeSecretsAnswer(bytes));
    if (answer.variant === "Refused") throw new ContainerError({ variant: "Refused", what: "secrets", error: answer.refusal });
  }

  close(): void {
    this.frames.close(1000);
  }

  /** Opens one channel on the begin scope and decodes its one answer. */
  askOnce<T>(what: string, request: ToolsBeginChannelRequest, decode: (bytes: Uint8Array) => T): Promise<T> {
    return new Promise((resolve, reject) => {
      let first: Uint8Array | undefined;
      this.openChannel(what, request, {
        response: (payload) => {
          first ??= payload.slice();
        },
        finish: (served) => {
          if (!served || !first) return reject(new ContainerError({ variant: "NotServed", what }));
          try {
            resolve(decode(first));
          } catch (error) {
            reject(unreadable(what, error));
          }
        },
        lost: () => reject(new ContainerError({ variant: "Lost", what })),
      }).catch(reject);
    });
  }

  /** Opens a channel of the provider's on the begin scope. */
  async openChannel(what: string, request: ToolsBeginChannelRequest, handlers: { response(payload: Uint8Array): void; finish(served: boolean): void; lost(): void }): Promise<void> {
    if (this.beginScope === undefined) throw new ContainerError({ variant: "NotBegun", what });
    if (this.frames.mux.ended) throw new ContainerError({ variant: "Lost", what });
    this.frames.mux.openChannel(this.beginScope, encodeToolsBeginChannelRequest(request), handlers);
  }

  private onProxyChannel(responder: Responder, payload: Uint8Array): void {
    let request: ToolsBeginServerChannelRequest;
    try {
      request = decodeToolsBeginServerChannelRequest(payload, { check: checkMcp });
    } catch {
      // An ask the provider cannot read is answered by a bare finish.
      return responder.finish();
    }
    if (request.variant === "Postgres" || request.variant === "Daemon") {
      const kind = request.variant === "Postgres" ? "postgres" : "daemon";
      const announced = this.announced(kind, request.connection_id, responder);
      const handler = kind === "postgres" ? this.options.onPostgres : this.options.onDaemon;
      if (handler) handler(announced);
      else announced.decline();
      return;
    }
    // Vault and outward MCP are not served on this connection by this client.
    responder.finish();
  }

  private announced(kind: "postgres" | "daemon", id: number, proxyHalf: Responder): AnnouncedConnection {
    const connection = this;
    let decided = false;
    return {
      kind,
      id,
      decline() {
        if (decided) return;
        decided = true;
        proxyHalf.finish();
      },
      accept(handlers) {
        if (decided) throw new Error(`${kind} connection ${id} was already accepted or declined`);
        decided = true;
        const tag = kind === "postgres" ? ({ variant: "Postgres", connection_id: id } as const) : ({ variant: "Daemon", connection_id: id } as const);
        let ended = false;
        const end = (served: boolean) => {
          if (ended) return;
          ended = true;
          handlers.end(served);
        };
        connection
          .openChannel(`${kind} connection ${id}`, tag, {
            response: (bytes) => handlers.data(bytes),
            finish: (served) => end(served),
            lost: () => end(false),
          })
          .catch(() => end(false));
        return {
          send: (bytes) => proxyHalf.respond(bytes),
          end: () => proxyHalf.finish(),
          get bufferedAmount() {
            return connection.frames.bufferedAmount;
          },
          drained: (lowWater) => connection.frames.drained(lowWater),
          pauseIncoming: () => connection.frames.pauseIncoming(),
        };
      },
    };
  }
}

/** The five MCP exchanges with the container's own MCP server. */
export class McpAsks {
  constructor(private readonly connection: ContainerConnection) {}

  async listTools(params?: PaginatedRequestParams): Promise<ListToolsResult> {
    const answer = await this.connection.askOnce("tools/list", { variant: "McpListTools", params: params ?? null }, (bytes) => decodeMcpListToolsAnswer(bytes, { check: checkMcp }));
    return resultOf("tools/list", answer) as ListToolsResult;
  }

  async listResources(params?: PaginatedRequestParams): Promise<ListResourcesResult> {
    const answer = await this.connection.askOnce("resources/list", { variant: "McpListResources", params: params ?? null }, (bytes) => decodeMcpListResourcesAnswer(bytes, { check: checkMcp }));
    return resultOf("resources/list", answer) as ListResourcesResult;
  }

  async callTool(params: CallToolRequestParams): Promise<CallToolResult> {
    const answer = await this.connection.askOnce("tools/call", { variant: "McpCallTool", params }, (bytes) => decodeMcpCallToolAnswer(bytes, { check: checkMcp }));
    return resultOf("tools/call", answer) as CallToolResult;
  }

  async readResource(params: ReadResourceRequestParams): Promise<ReadResourceResult> {
    const answer = await this.connection.askOnce("resources/read", { variant: "McpReadResource", params }, (bytes) => decodeMcpReadResourceAnswer(bytes, { check: checkMcp }));
    return resultOf("resources/read", answer) as ReadResourceResult;
  }

  /** Every notification the container's MCP server sends from now on, in order. */
  notifications(): NotificationStream {
    const what = "notifications";
    const queue: ServerNotification[] = [];
    let failure: ContainerError | undefined;
    let done = false;
    let wake: (() => void) | undefined;
    const signal = () => {
      wake?.();
      wake = undefined;
    };
    let errorSeen = false;
    this.connection
      .openChannel(what, { variant: "McpNotifications" }, {
        response: (payload) => {
          if (done) return;
          try {
            const answer = decodeMcpNotificationsAnswer(payload, { check: checkMcp });
            if (answer.variant === "Notification") queue.push(answer.notification as ServerNotification);
            else {
              errorSeen = true;
              failure = new ContainerError({ variant: "Mcp", what, error: answer.error as ErrorData });
            }
          } catch (error) {
            failure = unreadable(what, error);
          }
          signal();
        },
        finish: (served) => {
          if (!served && !errorSeen) failure ??= new ContainerError({ variant: "NotServed", what });
          done = true;
          signal();
        },
        lost: () => {
          done = true;
          signal();
        },
      })
      .catch((error: ContainerError) => {
        failure = error;
        done = true;
        signal();
      });
    return {
      close() {
        done = true;
        queue.length = 0;
        signal();
      },
      async *[Symbol.asyncIterator]() {
        for (;;) {
          if (queue.length > 0) {
            yield queue.shift()!;
            continue;
          }
          if (failure) throw failure;
          if (done) return;
          await new Promise<void>((resolve) => (wake = resolve));
        }
      },
    };
  }
}

function resultOf(what: string, answer: { variant: "Result"; result: unknown } | { variant: "Error"; error: unknown }): unknown {
  if (answer.variant === "Error") throw new ContainerError({ variant: "Mcp", what, error: answer.error as ErrorData });
  return answer.result;
}

function unreadable(what: string, error: unknown): ContainerError {
  if (error instanceof DecodeError) return new ContainerError({ variant: "Unreadable", what, reason: error.message });
  return new ContainerError({ variant: "Unreadable", what, reason: error instanceof Error ? error.message : String(error) });
}
