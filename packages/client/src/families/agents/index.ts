// The agents family: an agent container, which holds a conversation instead of serving MCP tools.
// The provider begins it (agents::begin, container-proxy endpoint 0), enqueues messages under keys of
// its own and reads the loop's chunks; the proxy's run loop owns the queue. Defined by
// spec/2.3.0/agents-begin.yaml (the begin request), agents-begin-scope.yaml (Begun, NotBegun, Chunk,
// A5's skipped loop markers), agents-begin-channels.yaml (the seed-aligned provider table: 0 Postgres,
// 1 Info, 2 Daemon, 3 Enqueue, 4 Dequeue, 5 Secrets; the twelve proxy-opened channels),
// agents-chunk.yaml (AgenticLoopChunk, fourteen variants), agent-paths.yaml (`/agent/*`, the paths
// generation), ../shared/protocol/agents.md §1–§9 and ../shared/protocol/README.md §H.
//   agent.ts        the Agent API both transports give, its fates and the chunk hub
//   fold.ts         deltas folded into whole messages (ChunkFold, foldChunks)
//   multiplexed.ts  the begin scope and its channels on / (beginAgent)
//   paths.ts        /agent/* (beginPathsAgent)
//   a2a.ts          an Agent served over the Agent2Agent protocol (`diverge connect --serve-agent`)
export { contentOf, type Agent, type AgentBeginRequest, type AgentEvent, type ChunksOptions, type EnqueueFate, type EnqueueOptions, type SettledOptions } from "./agent.js";
export { ChunkFold, foldChunks, foldAll, blockOfUserPart, type FoldedMessage, type FoldStep, type UsageTotals } from "./fold.js";
export { beginAgentOn, type AgentScopeHost } from "./multiplexed.js";
export { beginPathsAgent, PathsAgent } from "./paths.js";
export { serveAgentA2a, agentCardOf, blocksOfParts, ContainerAgentExecutor, AGENT_CARD_PATH, type ServeAgentOptions, type ServingAgent } from "./a2a.js";
