// Where a database is, for either transport's postgres pipe. The pipe carries the program's own
// driver bytes: its startup message names the user and the database, its password exchange and its
// TLS request (sslmode) go through as they are. So where to dial is all the provider gives — a host
// and a port, or a Unix socket — and a URL's other parts cannot be honoured here.
export type DatabaseAddress = { readonly host: string; readonly port: number } | { readonly path: string };

/** URLs already warned about (one warning each per process). */
const warned = new Set<string>();

/**
 * `{ host, port }` or `{ path }` (a Unix socket, e.g. `/var/run/postgresql/.s.PGSQL.5432`) as they
 * are; a `postgres://…` URL for its host and port only, with one process warning (code
 * DIVERGE_DATABASE_URL_PARTS), or one call of `onIgnored`, naming the parts that are the program's
 * driver's business.
 */
export function databaseAddress(target: string | DatabaseAddress, onIgnored?: (text: string) => void): DatabaseAddress {
  if (typeof target !== "string") return target;
  const url = new URL(target);
  const ignored = [
    url.username && "user",
    url.password && "password",
    url.pathname.replace(/^\//, "") && "database",
    ...[...url.searchParams.keys()],
  ].filter((part): part is string => Boolean(part));
  if (ignored.length > 0 && !warned.has(target)) {
    warned.add(target);
    const text = `database ${url.hostname}:${url.port || 5432}: only the host and port of the URL are used; its ${ignored.join(", ")} ${ignored.length === 1 ? "is" : "are"} the program's driver's to send through the pipe (give { host, port } or { path })`;
    if (onIgnored) onIgnored(text);
    else process.emitWarning(text, { code: "DIVERGE_DATABASE_URL_PARTS" });
  }
  return { host: url.hostname || "127.0.0.1", port: url.port ? Number(url.port) : 5432 };
}
