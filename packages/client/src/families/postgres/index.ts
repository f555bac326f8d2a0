// The postgres family: a program's database connections, carried to the provider's database as raw
// driver bytes. Defined by spec/2.3.0/connections.yaml, spec/2.3.0/tools-begin-channels.yaml
// (provider-opened tag 0) and spec/2.3.0/postgres-path.yaml, ../shared/protocol/multiplexed.md
// §9.1, §10.1 (the pair: proxy-opened tag 0, provider tag 0) and ../shared/protocol/paths.md §6
// (/requests kind 11, /postgres/{channel}).
export { databaseAddress, type DatabaseAddress } from "./address.js";
export { pipePostgres, postgresPair, DATABASE_BUDGET, type PipePostgresOptions, type PostgresPairOptions } from "./multiplexed.js";
export { postgresOverPaths, type PostgresPathsOptions, type PostgresPathsStats } from "./paths.js";
