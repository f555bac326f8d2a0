// secrets: the provider's secrets feed, posted to the program's `/secrets` on the begin scope's
// provider-opened channel 8 (multiplexed.ts), and the gate that holds every MCP exchange until the
// first `Fed` (gate.ts). Spec: spec/2.3.0/tools-begin-scope.yaml (SecretsAnswer),
// tools-begin-channels.yaml; ../shared/protocol/README.md §B, §G, multiplexed.md §9.9.
export { Gate, GateAbandoned, gateError } from "./gate.js";
export { secretsChannels } from "./multiplexed.js";
