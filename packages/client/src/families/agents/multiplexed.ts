// An agent container on the multiplexed connection: the agents::begin scope (endpoint 0; Begun, then
// one Chunk per piece of every loop for the proxy's life; A5's loop markers read and skipped), the
// provider-opened channels of its table (1 Info, 3 Enqueue, 4 Dequeue, 5 Secrets; 0 and 2 are the
// pairs, opened by the pair engine) through the generated asks, and the proxy-opened channels of the
// scope read with the agents decoder and answered by the connection's handlers through the generated
// dispatch — the same handlers as on a tool container's scope.
import {
  decodeAgentsBeginResponse,
  decodeAgentsBeginServerChannelRequest,
  encodeAgentsBeginChannelRequest,
  encodeContainerProxyRequest,
  type AgentsBeginChannelRequest,
  type AgentsBeginServerChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import type { FrameSocket, Responder } from "@diverge/multiplexer";
import { bindAgentsBeginChannelsProviderAsks, dispatchAgentsBeginChannelsProxyChannel, type AgentsBeginChannelsProviderAsks, type DispatchedAsk, type ProviderHandlers } from "../../gen/exchanges.js";
import type { ChannelOutcome } from "../../exchanges/engine.js";
import { channelAskEngine } from "../../multiplexed/channel-engine.js";
import { ContainerError, FRAME_HEADER_BYTES, failures, refuseOversized, unreadable } from "../../multiplexed/errors.js";
import type { DeclaredTool } from "../../multiplexed/container.js";
import { bounded, type RequestOptions } from "../../waiting.js";
import { typedInfo, type ContainerInfo } from "../info/front-matter.js";
import { ChunkHub, contentOf, type Agent, type AgentBeginRequest, type AgentEvent, type ChunksOptions, type EnqueueFate, type EnqueueOptions, type SettledOptions } from "./agent.js";

/** What the agents adapter uses of the multiplexed connection (`MultiplexedConnection` gives it). */
export interface AgentScopeHost {
  readonly frames: FrameSocket;
  /** The connection's begin scope is now `scope` (whichever family began it); its proxy-opened channels go to `route`. */
  began(scope: number, route: (responder: Responder, payload: Uint8Array) => void): void;
  /** The begin scope `scope` ended (the proxy is ending). */
  endScope(scope: number): void;
  /** Answers a proxy-opened channel: a pair's announcement to the pair engine, an exchange to `dispatch` with the connection's handlers. */
  serveProxyChannel(responder: Responder, request: { readonly variant: string; readonly connection_id?: number }, dispatch: (handlers: ProviderHandlers) => DispatchedAsk | undefined): void;
  /** The proxy's message limit (the connection's `maxMessageBytes`): a larger frame would end the connection. */
  readonly maxMessageBytes: number;
  /** The bounded ask of one channel of the begin scope (see `MultiplexedConnection.askChannel`). */
  askChannel<A>(what: string, ask: () => Promise<ChannelOutcome<A>>, options?: RequestOptions, waitingFor?: () => string): Promise<A>;
}

/** Opens the agents::begin scope; resolves with the Agent once the program took the arguments (Begun). */
export function beginAgentOn(host: AgentScopeHost, request: AgentBeginRequest, options?: RequestOptions): Promise<Agent> {
  const what = "agents::begin";
  const begin: { arguments: unknown; image?: { name: string; digest: string } } = { arguments: request.arguments ?? null };
  if (request.image) begin.image = { name: request.image.name, digest: request.image.digest };
  return bounded<Agent>(options, failures(what, () => "the proxy's Begun (the program's POST /register answer)"), (resolve, reject) => {
    if (host.frames.mux.ended) return reject(new ContainerError({ variant: "Lost", what }));
    const payload = encodeContainerProxyRequest({ variant: "AgentsBegin", begin });
    refuseOversized(what, payload, host.maxMessageBytes);
    let agent: MultiplexedAgent | undefined;
    const opened = host.frames.mux.openScope(payload, {
      response: (payload) => {
        let answer;
        try {
          answer = decodeAgentsBeginResponse(payload);
        } catch (error) {
          if (agent) return agent.hub.emit({ type: "unreadableChunk", reason: error instanceof Error ? error.message : String(error) });
          return reject(unreadable(what, error));
        }
        switch (answer.variant) {
          case "Begun":
            if (agent) return;
            agent = new MultiplexedAgent(host, opened.scope, declaredTools(answer.tools));
            host.began(opened.scope, (responder, bytes) => agent!.onProxyChannel(responder, bytes));
            return resolve(agent);
          case "NotBegun":
            return reject(new ContainerError({ variant: "Refused", what, error: answer.error }));
          case "Chunk":
            if (!agent) return reject(new ContainerError({ variant: "Unreadable", what, reason: "a chunk came before Begun" }));
            return agent.hub.push(answer.chunk);
          case "LoopActive":
          case "LoopInactive":
            // A5's markers: never a chunk; an Inactive says the loop is over.
            if (!agent) return;
            // A proxy that sends them marks every loop: idleness is no longer guessed.
            agent.hub.marksLoopEnd = true;
            agent.hub.loopRunning = answer.variant === "LoopActive";
            return agent.hub.emit({ type: "loopMarker", marker: answer.variant === "LoopActive" ? "active" : "inactive" });
        }
      },
      finish: () => {
        if (agent) {
          host.endScope(opened.scope);
          return agent.hub.end();
        }
        reject(new ContainerError({ variant: "NotServed", what }));
      },
      lost: () => {
        if (agent) {
          host.endScope(opened.scope);
          return agent.hub.end();
        }
        reject(new ContainerError({ variant: "Lost", what }));
      },
    });
  });
}

class MultiplexedAgent implements Agent {
  readonly transport = "multiplexed" as const;
  readonly hub = new ChunkHub();
  private readonly asks: AgentsBeginChannelsProviderAsks;
  private secretsFed = false;

  constructor(
    private readonly host: AgentScopeHost,
    readonly scope: number,
    readonly tools: readonly DeclaredTool[],
  ) {
    this.asks = bindAgentsBeginChannelsProviderAsks(
      channelAskEngine<AgentsBeginChannelRequest>({
        encode: encodeAgentsBeginChannelRequest,
        open: (payload, handlers) => {
          if (this.hub.isOver) throw new ContainerError({ variant: "Lost", what: "agents::begin channel" });
          refuseOversized("agents::begin channel", payload, host.maxMessageBytes);
          host.frames.mux.openChannel(scope, payload, handlers);
        },
      }),
    );
  }

  get maxMessageBytes(): number {
    return this.host.maxMessageBytes;
  }

  enqueueBytes(key: string, content: string | Parameters<Agent["enqueue"]>[1]): number {
    return encodeAgentsBeginChannelRequest({ variant: "Enqueue", message: { key, content: contentOf(content) } }).length + FRAME_HEADER_BYTES;
  }

  enqueue(key: string, content: string | Parameters<Agent["enqueue"]>[1], options?: EnqueueOptions): Promise<EnqueueFate> {
    const message = { key, content: contentOf(content) };
    const bytes = this.enqueueBytes(key, content);
    if (bytes > this.maxMessageBytes) return Promise.reject(new ContainerError({ variant: "TooLarge", what: "enqueue", bytes, limit: this.maxMessageBytes }));
    this.hub.pendingFates++;
    this.hub.changed();
    const asked = this.host.askChannel(
      "enqueue",
      () => this.asks.enqueue({ message }),
      // No timeout: the fate comes when it is known, however long that takes.
      { signal: options?.signal, timeoutMs: Infinity },
      () => (this.secretsFed ? `the fate of the message under "${key}"` : `the fate of the message under "${key}"; the secrets were never fed, and a proxy with the secrets gate holds every enqueue until feedSecrets resolves`),
    );
    const settle = () => {
      this.hub.pendingFates--;
      this.hub.lastActivity = Date.now();
      this.hub.changed();
    };
    return asked.then(
      (answer) => {
        settle();
        if (answer.variant === "Refused") throw new ContainerError({ variant: "Refused", what: "enqueue", error: answer.error });
        return answer.variant === "Delivered" ? "delivered" : "dequeued";
      },
      (error) => {
        settle();
        throw error;
      },
    );
  }

  async dequeue(key: string, options?: RequestOptions): Promise<boolean> {
    const answer = await this.host.askChannel("dequeue", () => this.asks.dequeue({ request: { key } }), options, () => `the proxy's dequeue of "${key}"`);
    if (answer.variant === "Failed") throw new ContainerError({ variant: "Refused", what: "dequeue", error: answer.error });
    return answer.variant === "Withdrew";
  }

  chunks(options?: ChunksOptions) {
    return this.hub.chunks(options);
  }

  settled(options?: SettledOptions): Promise<void> {
    return this.hub.settled(options);
  }

  async info(options?: RequestOptions): Promise<ContainerInfo | undefined> {
    const answer = await this.host.askChannel("info", () => this.asks.info({}), options, () => "the proxy's reading of DIVERGE.md");
    return answer.variant === "Info" ? typedInfo(answer.info) : undefined;
  }

  async feedSecrets(values: Record<string, string>, options?: RequestOptions): Promise<void> {
    const answer = await this.host.askChannel("secrets", () => this.asks.secrets({ values }), options, () => "the program's POST /secrets answer");
    if (answer.variant === "Refused") throw new ContainerError({ variant: "Refused", what: "secrets", error: answer.refusal });
    this.secretsFed = true;
  }

  onEvent(listener: (event: AgentEvent) => void): () => void {
    return this.hub.onEvent(listener);
  }

  ended(): Promise<void> {
    return this.hub.ended();
  }

  /** A channel the proxy opened on the agents scope: read with its decoder, answered as on a tool container's. */
  onProxyChannel(responder: Responder, payload: Uint8Array): void {
    let request: AgentsBeginServerChannelRequest;
    try {
      request = decodeAgentsBeginServerChannelRequest(payload, { check: checkMcp });
    } catch {
      return responder.finish();
    }
    this.host.serveProxyChannel(responder, request, (handlers) => this.counted(dispatchAgentsBeginChannelsProxyChannel(request, handlers)));
  }

  /**
   * The ask, counted while it is answered (an agent waiting on its own ask is not idle). A stream that
   * lasts the connection (the resident notifications ask) is not a wait of the loop's and is not counted.
   */
  private counted(dispatched: DispatchedAsk | undefined): DispatchedAsk | undefined {
    if (!dispatched || dispatched.exchange.pattern === "perNotification") return dispatched;
    const hub = this.hub;
    return {
      exchange: dispatched.exchange,
      async *answer(context) {
        hub.asksInFlight++;
        hub.changed();
        try {
          yield* dispatched.answer(context);
        } finally {
          hub.asksInFlight--;
          hub.lastActivity = Date.now();
          hub.changed();
        }
      },
    };
  }
}

function declaredTools(tools: unknown): DeclaredTool[] {
  if (!Array.isArray(tools)) return [];
  return tools.filter((tool): tool is DeclaredTool => typeof tool === "object" && tool !== null && typeof (tool as { name?: unknown }).name === "string");
}
