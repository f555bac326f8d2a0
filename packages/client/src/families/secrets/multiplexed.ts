// The secrets feed on the multiplexed connection: one channel of the begin scope (provider-opened tag 8).
import { ContainerError } from "../../multiplexed/errors.js";
import type { ConnectionHost } from "../../multiplexed/host.js";
import type { RequestOptions } from "../../waiting.js";
import type { SecretsGate } from "./gate.js";

/** Feeds the secrets' values; resolves on `Fed` (opening `gate`), rejects with `Refused` and the program's words. */
export async function feedSecretsOn(connection: ConnectionHost, gate: SecretsGate, values: Record<string, string>, options?: RequestOptions): Promise<void> {
  const answer = await connection.askChannel("secrets", () => connection.asks.secrets({ values }), options, () => "the program's POST /secrets answer");
  if (answer.variant === "Refused") throw new ContainerError({ variant: "Refused", what: "secrets", error: answer.refusal });
  gate.open();
}
