// vault: the provider's key-value store, asked for the program through its HTTP API on the program
// port (paths.ts). The asks go through the exchange engine: `/requests` kinds 5-9, or the begin
// scope's proxy-opened tags 2-6 once a provider has begun. Spec: spec/2.3.0/vault.yaml,
// requests.yaml, tools-begin-channels.yaml; ../shared/protocol/paths.md §7, multiplexed.md §10.5–§10.9.
export { VaultApi } from "./paths.js";
