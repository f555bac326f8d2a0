// The secrets family: the provider feeds the values of the secrets the program's DIVERGE.md declares,
// and the proxy holds every MCP exchange until the program has taken them (the gate). Defined by
// spec/2.3.0/tools-begin-channels.yaml (provider-opened tag 8, `Secrets`), spec/2.3.0/tools-begin-scope.yaml (its answer) and
// ../shared/protocol/multiplexed.md (the tools::begin channels; the secrets gate).
export { feedSecretsOn } from "./multiplexed.js";
export { SecretsGate } from "./gate.js";
