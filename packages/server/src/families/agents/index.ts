// agents: the agent container's family, agents::begin (container-proxy endpoint 0) and /agent/*.
// Multiplexed (multiplexed.ts): the begin (`POST /register` → Begun with the tools as the program wrote
// them, or NotBegun), the run loop (run-loop.ts: the proxy's queue, `POST /run` / `/enqueue` /
// `/dequeue`, the event stream relayed as Chunk responses), and the begun scope's provider-opened
// channels 0 Postgres, 1 Info, 2 Daemon, 5 Secrets (the tools families' own) and 3 Enqueue, 4 Dequeue;
// the proxy-opened channels are tools::begin's twelve, through the engine. Paths (paths.ts):
// /agent/register|run|schema|enqueue|dequeue, straight relays to the program.
// Spec: spec/2.3.0/agents-begin.yaml, agents-begin-scope.yaml, agents-begin-channels.yaml,
// agents-chunk.yaml, agent-program.yaml, agent-paths.yaml; ../shared/protocol/agents.md (§2-§9, §11),
// ../shared/protocol/README.md §H.
export { agentsScopes, BEGUN_ERROR, type AgentsScopes, type SharedAgentChannels } from "./multiplexed.js";
export { RunLoop, RUN_CALL_DIED, type AgentProgram, type DequeueResult, type Delivery, type Fate, type ProgramDequeue, type RunLoopOptions, type RunStart } from "./run-loop.js";
export { HttpAgentProgram } from "./agent-program.js";
export { AgentPaths, LOOP_DIED, type AgentPathsOptions } from "./paths.js";
export { sseEvents, type SseItem } from "./sse.js";
