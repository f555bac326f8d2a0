// The secrets feed on the multiplexed connection: the begin scope's provider-opened channel 8
// (Secrets), posted to the program's `/secrets`; once it is taken the gate opens.
import { encodeSecretsAnswer } from "@diverge/codec";
import type { Responder } from "@diverge/multiplexer";
import type { ToolsBeginChannelsProviderRoutes } from "../../gen/exchanges.js";
import type { ConnectionServices } from "../../multiplexed/family.js";
import { postToProgram } from "../../multiplexed/program.js";

export function secretsChannels(services: ConnectionServices): Pick<ToolsBeginChannelsProviderRoutes<Responder>, "secrets"> {
  return {
    secrets: (request, responder) => services.guard(responder, `channel ${responder.channel}`, feedSecrets(services, responder, request.values)),
  };
}

async function feedSecrets({ options, signal, gate }: ConnectionServices, responder: Responder, values: Record<string, string>): Promise<void> {
  // The log names how many values, never one of them; and redacts them from here on (onSecretsFed).
  options.onSecretsFed?.(Object.values(values));
  options.log(`feeding ${Object.keys(values).length} secret(s) to the program`);
  const answer = await postToProgram(options.appPort, "/secrets", JSON.stringify(values), signal);
  if (answer.ok) {
    responder.respond(encodeSecretsAnswer({ variant: "Fed" }));
    responder.finish();
    gate.open();
    return;
  }
  options.log(`the program refused the secrets (HTTP ${answer.status ?? "unreachable"})`);
  responder.respond(encodeSecretsAnswer({ variant: "Refused", refusal: answer.error }));
  responder.finish();
}
