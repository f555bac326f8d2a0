// DIVERGE.md on the multiplexed connection: the begin scope's provider-opened channel 1 (Info).
import { logEvent } from "@diverge/multiplexer/log";
import { encodeInfoAnswer } from "@diverge/codec";
import type { Responder } from "@diverge/multiplexer";
import type { ToolsBeginChannelsProviderRoutes } from "../../gen/exchanges.js";
import { FRAME_HEADER, type ConnectionServices } from "../../multiplexed/family.js";
import { loadDivergeInfo } from "./diverge-md.js";

export function infoChannels(services: ConnectionServices): Pick<ToolsBeginChannelsProviderRoutes<Responder>, "info"> {
  return {
    info: (_request, responder) => services.guard(responder, `channel ${responder.channel}`, answerInfo(services, responder)),
  };
}

/**
 * Info always describes the file: `[0]` with it, `[1]` when there is none. A file whose answer
 * cannot be sent (larger than the message limit, or unreadable) is not served: a bare finish, which
 * the provider tells apart from `[1]`, and a log line saying why.
 */
async function answerInfo({ options, counters }: ConnectionServices, responder: Responder): Promise<void> {
  const limit = options.maxMessageBytes;
  const outcome = await loadDivergeInfo(options.root, { maxBytes: limit, log: options.log });
  if (responder.finished) return;
  if (outcome.variant === "NotServed") {
    if (outcome.tooLarge) counters.oversizedAnswers++;
    options.log(...logEvent("Info: DIVERGE.md is not served (a bare finish): {reason}", { reason: outcome.reason }));
    return responder.finish();
  }
  const answer = encodeInfoAnswer(outcome.variant === "Info" ? { variant: "Info", info: { frontMatter: outcome.info.frontMatter, body: outcome.info.body } } : { variant: "None" });
  if (answer.length + FRAME_HEADER > limit) {
    counters.oversizedAnswers++;
    options.log(`Info: DIVERGE.md is not served (a bare finish): its answer is ${answer.length} bytes, larger than the message limit of ${limit}`);
    return responder.finish();
  }
  responder.respond(answer);
  responder.finish();
}
