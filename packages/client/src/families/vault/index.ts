// The vault family: a key-value store with locks that a program keeps across its containers, answered
// by the provider (get, set, delete, lock, unlock) through the generated dispatch on either transport;
// this folder holds the store. Defined by spec/2.3.0/vault.yaml, ../shared/protocol/multiplexed.md
// §10.5-§10.9 (proxy-opened tags 2-6) and ../shared/protocol/paths.md §7 (/requests kinds 5-9).
export { PostgresVault, type SqlClient, type VaultOptions } from "./store.js";
