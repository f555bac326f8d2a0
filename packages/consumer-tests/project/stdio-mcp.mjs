// A provider's MCP server on stdio (the MCP SDK's), for `diverge connect -- …` and `diverge answer -- …`:
// its one tool greets with the greeting its first argument gives (one argv entry, spaces kept).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const greeting = process.argv[2] ?? "Hello";
const server = new McpServer({ name: "stdio-greeter", version: "1.0.0" });
server.registerTool("greet", { description: "Greets a name.", inputSchema: {} }, async (args) => ({
  content: [{ type: "text", text: `${greeting}, ${process.argv.length - 2} argument(s)!` }],
}));
await server.connect(new StdioServerTransport());
