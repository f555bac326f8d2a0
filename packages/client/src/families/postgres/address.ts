// Where a database is, for either transport's postgres pipe: only the host and port; the bytes carry the rest.
export interface DatabaseAddress {
  readonly host: string;
  readonly port: number;
}

/** `postgres://user:pass@host:port/db` or `{host, port}`: only where to dial; the bytes carry the rest. */
export function databaseAddress(target: string | DatabaseAddress): DatabaseAddress {
  if (typeof target !== "string") return target;
  const url = new URL(target);
  return { host: url.hostname || "127.0.0.1", port: url.port ? Number(url.port) : 5432 };
}
