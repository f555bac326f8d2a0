// node loopback.mjs: a proxy (@diverge/server) and a provider (@diverge/client), both from the
// installed tarballs, over loopback: the client holds the proxy's /requests and answers the MCP
// exchanges the proxy asks it. Prints what the proxy got back as one JSON line.
import { startProxy } from "@diverge/server";
import { connectProxy } from "@diverge/client";

const watchdog = setTimeout(() => {
  process.stderr.write("loopback: no answer within 30 s\n");
  process.exit(2);
}, 30_000);

const proxy = await startProxy({ host: "127.0.0.1", port: 0, programPort: 0, pgPort: 0, secretsGate: false });
const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, {
  listTools: () => ({ variant: "Result", result: { tools: [{ name: "add", inputSchema: { type: "object" } }] } }),
  callTool: async (params) => ({
    variant: "Result",
    result: { content: [{ type: "text", text: String(params.arguments.a + params.arguments.b) }] },
  }),
});
try {
  await connection.whenConnected();
  const tools = await proxy.mcp.listTools();
  const called = await proxy.mcp.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  process.stdout.write(`${JSON.stringify({ tools, called })}\n`);
} finally {
  await connection.close();
  await proxy.close();
  clearTimeout(watchdog);
}
