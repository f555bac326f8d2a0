// The info family: the container's DIVERGE.md (its front matter and body), which the proxy reads from
// the container's root without asking the program. Defined by spec/2.3.0/tools-begin-channels.yaml
// (provider-opened tag 1, `Info`), spec/2.3.0/tools-begin-scope.yaml (its answer) and ../shared/protocol/multiplexed.md (the tools::begin channels),
// with the answer's bytes a project decision (../shared/protocol/README.md §B).
export { askInfo } from "./multiplexed.js";
export { typedInfo, type ContainerInfo, type DivergeFrontMatter } from "./front-matter.js";
