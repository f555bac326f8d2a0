// The daemon family: a program's connection to its daemon, carried as a pair of channels on the
// multiplexed connection (the proxy announces it, the provider answers its half), raw frames both ways.
// Defined by spec/2.3.0/connections.yaml and spec/2.3.0/tools-begin-channels.yaml (provider-opened
// tag 2, `Daemon`) and ../shared/protocol/multiplexed.md §9.3, §10.3 (the daemon pair).
export { daemonPair, type DaemonPairOptions } from "./multiplexed.js";
