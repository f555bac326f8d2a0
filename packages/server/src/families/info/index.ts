// info: the container's DIVERGE.md (diverge-md.ts reads and parses it), answered on the begin
// scope's provider-opened channel 1 (multiplexed.ts). Spec: spec/2.3.0/tools-begin-scope.yaml
// (InfoAnswer), tools-begin-channels.yaml; ../shared/protocol/README.md §B, multiplexed.md §9.9.
export { parseDivergeMarkdown, readDivergeInfo, loadDivergeInfo, type DivergeInfo, type InfoOutcome, type InfoOptions } from "./diverge-md.js";
export { infoChannels } from "./multiplexed.js";
