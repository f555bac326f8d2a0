// agents::begin on the multiplexed connection (agents.md §2-§6): the begin (`POST /register`, Begun with
// the tools as the program wrote them, or NotBegun), the run loop's chunks on the begin scope, and the
// provider-opened channels of the begun scope: Postgres, Info, Daemon and Secrets are the tools
// families' own (the registry hands them in), Enqueue and Dequeue are the run loop's.
import { logEvent } from "@diverge/multiplexer/log";
import {
  AgentsBeginChannelRequestError,
  ProgramRunEventError,
  decodeAgentsBeginChannelRequest,
  decodeProgramRunEvent,
  encodeAgentsBeginResponse,
  encodeDequeueAnswer,
  encodeEnqueueAnswer,
  type AgentBegin,
  type AgentsBeginChannelRequest,
  type ContainerProxyRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import type { Responder } from "@diverge/multiplexer";
import { routeAgentsBeginChannelsProviderChannel, type AgentsBeginChannelsProviderRoutes } from "../../gen/exchanges.js";
import { FRAME_HEADER, type BeginFamily, type ConnectionServices } from "../../multiplexed/family.js";
import { HttpAgentProgram, notificationOf } from "./agent-program.js";
import { garbageWords } from "./program.js";
import { RunLoop } from "./run-loop.js";

/** The channels the tools families serve on the agents scope too (tags 0, 1, 2, 5). */
export type SharedAgentChannels = Pick<AgentsBeginChannelsProviderRoutes<Responder>, "postgres" | "info" | "daemon" | "secrets">;

/** The relay waits for the connection's send buffer to drain below this before the next chunk once it is above twice this. */
const LOW_WATER = 1024 * 1024;

const CHUNK_TAG = 2;
const encoder = new TextEncoder();

/** The A6 text of a second begin (agents.md §3.2, golden example A6). */
export const BEGUN_ERROR = { kind: "begun", error: "this connection has begun" } as const;

export interface AgentsScopes {
  /** The scope route of endpoint 0, its request read by the container-proxy request frame. */
  route(request: Extract<ContainerProxyRequest, { variant: "AgentsBegin" }>, responder: Responder): Promise<void>;
  /** The run loop of the begun scope, when this connection began an agent (for tests and logs). */
  readonly loop: RunLoop | undefined;
}

export function agentsScopes(services: ConnectionServices, shared: SharedAgentChannels): AgentsScopes {
  const { options } = services;
  const program = new HttpAgentProgram(() => options.appPort, options.maxMessageBytes);
  let loop: RunLoop | undefined;

  const routes: AgentsBeginChannelsProviderRoutes<Responder> = {
    ...shared,
    enqueue: (request, responder) => {
      if (!loop) return responder.finish();
      loop.enqueue(request.message, (fate) => {
        if (responder.finished) return;
        responder.respond(encodeEnqueueAnswer(fate));
        responder.finish();
      });
    },
    dequeue: (request, responder) => {
      const current = loop;
      if (!current) return responder.finish();
      services.guard(
        responder,
        `channel ${responder.channel}`,
        current.dequeue(request.request.key).then((result) => {
          if (responder.finished) return;
          responder.respond(encodeDequeueAnswer(result));
          responder.finish();
        }),
      );
    },
  };

  const routeChannel = (responder: Responder, payload: Uint8Array) => {
    let request: AgentsBeginChannelRequest;
    try {
      request = decodeAgentsBeginChannelRequest(payload, { check: checkMcp });
    } catch (error) {
      if (!(error instanceof AgentsBeginChannelRequestError)) throw error;
      // The secrets' decode error quotes none of their bytes; the others may be logged whole.
      options.log(...logEvent(`unreadable channel request on channel ${responder.channel}: {error}`, { error: error.message }));
      return responder.finish();
    }
    routeAgentsBeginChannelsProviderChannel(request, routes, responder);
  };

  /** One event of the loop in flight as a Chunk response: the program's JSON verbatim when it is a chunk, else the error value in a notification. */
  const chunkPayload = (data: string): Uint8Array => {
    const bytes = encoder.encode(data);
    let payload: Uint8Array;
    try {
      decodeProgramRunEvent(bytes, { check: checkMcp });
      payload = new Uint8Array(bytes.length + 1);
      payload[0] = CHUNK_TAG;
      payload.set(bytes, 1);
    } catch (error) {
      if (!(error instanceof ProgramRunEventError)) throw error;
      options.log(...logEvent("the program streamed an event that is not a chunk: {error}", { error: error.message }));
      payload = encoder.encode(String.fromCharCode(CHUNK_TAG) + notificationOf(garbageWords(error.message)));
    }
    if (payload.length + FRAME_HEADER > options.maxMessageBytes) {
      services.counters.oversizedAnswers++;
      payload = encoder.encode(String.fromCharCode(CHUNK_TAG) + notificationOf(garbageWords(`a chunk of ${payload.length - 1} bytes is larger than the message limit`)));
    }
    return payload;
  };

  const answer = async (responder: Responder, begin: AgentBegin, begun: () => void): Promise<void> => {
    const registered = await program.register(begin.arguments ?? null, services.signal);
    if (responder.finished || services.signal.aborted) return;
    if (!registered.ok) {
      options.log(`the agent program refused the begin (HTTP ${registered.status ?? "unreachable"}); the connection is not begun`);
      responder.respond(encodeAgentsBeginResponse({ variant: "NotBegun", error: registered.error }));
      return responder.finish();
    }
    responder.respond(encodeAgentsBeginResponse({ variant: "Begun", tools: registered.tools }));
    loop = new RunLoop({
      program,
      gate: services.gate,
      signal: services.signal,
      log: options.log,
      chunk: (data) => {
        if (responder.finished) return;
        responder.respond(chunkPayload(data));
        if (services.pairLink.bufferedAmount > 2 * LOW_WATER) return services.pairLink.drained(LOW_WATER);
      },
    });
    begun();
    options.log(`an agent begun with ${registered.tools.length} tool(s)`);
  };

  return {
    get loop() {
      return loop;
    },
    route({ begin }, responder) {
      const family: BeginFamily = {
        refuse(responder, begun) {
          responder.respond(encodeAgentsBeginResponse({ variant: "NotBegun", error: begun ? BEGUN_ERROR : { kind: "begun", error: "another begin is being answered" } }));
          responder.finish();
        },
        answer: (responder, begun) => answer(responder, begin, begun),
        channel: routeChannel,
      };
      return services.claimBegin(responder, family);
    },
  };
}
