// One process's run of the codec suites, for `runBench` to repeat in fresh processes: the JIT makes
// different choices in different processes, and a ratio of 10 ns operations moves with them.
//   node codec-child.js <suite,suite,…> <timing JSON>   (answers over IPC with its groups)
import { fixedFrames, jsonFrames, protobufPeer } from "./cases/codec.js";
import type { GroupResult, Timing } from "./measure.js";

const RUNS: Record<string, (t: Timing) => Promise<GroupResult[]>> = { fixed: fixedFrames, json: jsonFrames, protobuf: protobufPeer };

async function main(): Promise<void> {
  const [suites, timingJson] = process.argv.slice(2);
  const timing = JSON.parse(timingJson!) as Timing;
  const out: { suite: string; groups: GroupResult[] }[] = [];
  for (const suite of suites!.split(",")) out.push({ suite, groups: await RUNS[suite]!(timing) });
  process.send!(out, () => process.exit(0));
}

main().catch((problem) => {
  console.error(problem);
  process.exit(1);
});
