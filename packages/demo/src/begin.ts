// The tools::begin part of `pnpm demo`: a provider opens the proxy's multiplexed connection, begins
// the example container, feeds its secret, reads its DIVERGE.md, lists and calls its tools, and the
// container's program runs a query that reaches the database through the postgres pair.
// The database is PGlite behind a PostgreSQL socket by default; `--database-url` names a real server.
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import { openContainer, pipePostgres } from "@diverge/client";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";

function flag(name: string): string | undefined {
  const args = process.argv.slice(2);
  const at = args.indexOf(name);
  if (at >= 0) return args[at + 1];
  const inline = args.find((arg) => arg.startsWith(`${name}=`));
  return inline?.slice(name.length + 1);
}

function show(label: string, value: unknown): void {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  process.stdout.write(`  ${label.padEnd(22)} ${text.length > 150 ? `${text.slice(0, 147)}...` : text}\n`);
}

async function embeddedDatabase(): Promise<{ url: string; close(): Promise<void> }> {
  const db = await PGlite.create();
  await db.exec("CREATE TABLE greetings (id serial PRIMARY KEY, word text NOT NULL); INSERT INTO greetings (word) VALUES ('Hello'), ('Bonjour'), ('Hola');");
  const server = new PGLiteSocketServer({ db, port: 0, host: "127.0.0.1" });
  await server.start();
  const port = Number(server.getServerConn().split(":").pop());
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async close() {
      await server.stop();
      await db.close();
    },
  };
}

export async function runBeginDemo(): Promise<void> {
  process.stdout.write("\ntools::begin on the multiplexed connection (path /)\n");
  const given = flag("--database-url");
  const database = given ? { url: given, close: async () => {} } : await embeddedDatabase();
  const dbUser = new URL(database.url);
  show("database", given ? `PostgreSQL at ${dbUser.host}` : "PGlite (embedded) behind a PostgreSQL socket");

  let pgPort = 0;
  const program = await startExampleContainer({
    pgPort: () => pgPort,
    database: { user: decodeURIComponent(dbUser.username) || "postgres", password: decodeURIComponent(dbUser.password) || undefined, database: dbUser.pathname.slice(1) || "postgres" },
  });
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: program.port, root: exampleRoot });
  pgPort = proxy.multiplexed.pgPort;
  show("proxy", `ws://127.0.0.1:${proxy.port}/ (program at :${program.port}, postgres listener :${pgPort})`);

  const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, {
    onPostgres: (announced) => {
      show("postgres announced", `connection ${announced.id}: piped to the database`);
      pipePostgres(announced, database.url).catch((error: Error) => show("postgres failed", error.message));
    },
  });
  try {
    const tools = (await connection.beginTools({ arguments: { greeting: "Hello" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } })) as { name: string }[];
    show("begun, tools", tools.map((tool) => tool.name));
    const info = await connection.info();
    show("info front matter", info?.frontMatter ?? "none");
    try {
      await connection.feedSecrets({ WRONG_NAME: "x" });
    } catch (error) {
      show("secrets refused", (error as Error).message);
    }
    await connection.feedSecrets({ API_KEY: "demo-key" });
    show("secrets", "fed: the gate is open");
    const listed = await connection.mcp.listTools();
    show("tools/list", listed.tools.map((tool) => tool.name));
    const greeted = await connection.mcp.callTool({ name: "greet", arguments: { name: "Ada" } });
    show("tools/call greet", greeted.content);
    const read = await connection.mcp.readResource({ uri: "example://readme" });
    show("resources/read", read.contents);
    const queried = await connection.mcp.callTool({ name: "query", arguments: { sql: given ? "SELECT version() AS version" : "SELECT word FROM greetings ORDER BY id" } });
    show("tools/call query", queried.content);
    const stats = proxy.multiplexed.postgresStats();
    show("postgres pair", `${stats.announced} connection(s), ${stats.toProviderBytes} bytes out, ${stats.toProgramBytes} bytes back`);
  } finally {
    connection.close();
    await proxy.close();
    await program.close();
    await database.close();
  }
}
