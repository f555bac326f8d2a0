// postgres: the program's database connections. Multiplexed: a pair on the begin scope, announced on
// proxy-opened tag 0 and joined on provider-opened tag 0 (multiplexed.ts, over the pair engine in
// multiplexed/pairs.ts), from the loopback listener the driver connects to (listener.ts); paths:
// `/requests` kind 11 and `/postgres/{channel}` while no provider has begun on `/` (paths.ts).
// Spec: spec/2.3.0/connections.yaml, tools-begin-channels.yaml, postgres-path.yaml, requests.yaml;
// ../shared/protocol/multiplexed.md §9.1, §10.1, paths.md §6.
export { PostgresPairs, postgresChannels } from "./multiplexed.js";
export { attachPostgresListener } from "./listener.js";
export { PostgresOverRequests, type PostgresOverRequestsStats } from "./paths.js";
