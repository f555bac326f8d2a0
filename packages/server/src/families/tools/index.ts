// tools: the tool container's begin, tools::begin (container-proxy endpoint 1): `POST /register` with
// the arguments, Begun with the tools or NotBegun, then the begin scope's provider-opened channels
// (assembled by the registry from info, secrets, postgres, daemon and mcp-inward). Spec:
// spec/2.3.0/tools-begin.yaml, tools-begin-scope.yaml, tools-begin-channels.yaml; seed 004;
// ../shared/protocol/README.md §B, multiplexed.md §6-§9.
export { toolsBegin } from "./multiplexed.js";
