// tools::begin on the multiplexed connection: the begin (the engine holds the one claim per
// connection) and the routing of the channels the provider opens on the begun scope.
import { logEvent } from "@diverge/multiplexer/log";
import {
  ToolsBeginChannelRequestError,
  checkToolDeclarations,
  decodeToolsBeginChannelRequest,
  encodeToolsBeginResponse,
  type ContainerProxyRequest,
  type ToolsBeginChannelRequest,
  type ToolDeclarations,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import type { Responder } from "@diverge/multiplexer";
import { routeToolsBeginChannelsProviderChannel, type ToolsBeginChannelsProviderRoutes } from "../../gen/exchanges.js";
import type { BeginFamily, ConnectionServices } from "../../multiplexed/family.js";
import { postToProgram } from "../../multiplexed/program.js";

type ToolsBeginRequest = Extract<ContainerProxyRequest, { variant: "ToolsBegin" }>;

/** The scope route of endpoint 1: reads the begin object and claims the connection's begin for tools. */
export function toolsBegin(services: ConnectionServices, channels: ToolsBeginChannelsProviderRoutes<Responder>) {
  const { options } = services;
  const routeChannel = (responder: Responder, payload: Uint8Array) => {
    let request: ToolsBeginChannelRequest;
    try {
      request = decodeToolsBeginChannelRequest(payload, { check: checkMcp });
    } catch (error) {
      if (!(error instanceof ToolsBeginChannelRequestError)) throw error;
      options.log(...logEvent(`unreadable channel request on channel ${responder.channel}: {error}`, { error: error.message }));
      return responder.finish();
    }
    routeToolsBeginChannelsProviderChannel(request, channels, responder);
  };
  return {
    route(request: ToolsBeginRequest, responder: Responder): Promise<void> {
      const begin = request.begin;
      if (!isBeginObject(begin)) {
        options.log(`unreadable begin on scope ${responder.scope}: it needs "arguments" and, if any, an "image" of two strings`);
        responder.finish();
        return Promise.resolve();
      }
      const family: BeginFamily = {
        refuse(responder, begun) {
          // Begun, or a begin is being answered now: this one gets one error and the finish.
          const error = begun ? "the connection has already begun" : "another begin is being answered";
          responder.respond(encodeToolsBeginResponse({ variant: "NotBegun", error: { error } }));
          responder.finish();
        },
        answer: (responder, begun) => answerBegin(services, responder, begin, begun),
        channel: routeChannel,
      };
      return services.claimBegin(responder, family);
    },
  };
}

async function answerBegin({ options, signal }: ConnectionServices, responder: Responder, begin: Record<string, unknown>, begun: () => void): Promise<void> {
  const answer = await postToProgram(options.appPort, "/register", JSON.stringify(begin.arguments ?? null), signal);
  if (responder.finished) return;
  if (answer.ok) {
    const tools = parseJson(answer.body);
    // ToolDeclarations as the spec types them (agents.md §3.3: each an object with its `name`), relayed as the
    // program wrote them: what the provider's decoder would refuse is refused here, with why.
    const problem = Array.isArray(tools) ? checkToolDeclarations(tools) : undefined;
    if (Array.isArray(tools) && problem === undefined) {
      responder.respond(encodeToolsBeginResponse({ variant: "Begun", tools: tools as ToolDeclarations }));
      begun();
      options.log(`begun with ${tools.length} tool(s)`);
      return;
    }
    const error = problem === undefined ? "the program declared no JSON array of tools" : `the program declared tools a provider cannot read: ${problem}`;
    options.log(...logEvent("{error}; the connection is not begun", { error }));
    responder.respond(encodeToolsBeginResponse({ variant: "NotBegun", error: { error, status: answer.status } }));
    return responder.finish();
  }
  options.log(`the program refused the begin (HTTP ${answer.status ?? "unreachable"}); the connection is not begun`);
  responder.respond(encodeToolsBeginResponse({ variant: "NotBegun", error: answer.error }));
  responder.finish();
}

/** `{"arguments": <any>, "image"?: {"name": string, "digest": string}}`. */
function isBeginObject(begin: Record<string, unknown>): boolean {
  if (!("arguments" in begin)) return false;
  if (!("image" in begin)) return true;
  const image = begin.image as { name?: unknown; digest?: unknown } | null;
  return typeof image === "object" && image !== null && typeof image.name === "string" && typeof image.digest === "string";
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
