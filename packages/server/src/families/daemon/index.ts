// daemon: the program's daemon connections to the loopback `/daemon` endpoint (endpoint.ts), each a
// pair on the begin scope, announced on proxy-opened tag 1 and joined on provider-opened tag 2
// (multiplexed.ts, over the pair engine in multiplexed/pairs.ts). No paths-transport counterpart.
// Spec: spec/2.3.0/connections.yaml, tools-begin-channels.yaml; ../shared/protocol/multiplexed.md
// §9.3, §10.3.
export { DaemonPairs, daemonChannels, type ProgramSocket } from "./multiplexed.js";
export { attachDaemonEndpoint } from "./endpoint.js";
