// @diverge/example-agent: an agent program for tests and the demo (agents.md §8), in-process or as the
// `example-agent` command.
export {
  ARGUMENTS_SCHEMA,
  DEFAULT_MCP_URL,
  exampleAgentRoot,
  MISBEHAVIOURS,
  parseMisbehaviour,
  portFromEnv,
  startExampleAgent,
  type ExampleAgent,
  type ExampleAgentOptions,
  type Misbehaviour,
} from "./agent.js";
export * from "./chunks.js";
export { deltas, fragments, readMessage, Refusal, type Message, type Step } from "./script.js";
