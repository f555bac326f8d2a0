// An MCP server on stdio (the SDK's), for relayToMcp's stdio target. One tool, one resource, and a
// notification each time the tool runs.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "stdio-upstream", version: "1.0.0" }, { capabilities: { logging: {} } });
server.registerTool("reverse", { description: "Reverses text", inputSchema: { text: z.string() } }, async ({ text }) => {
  await server.server.sendLoggingMessage({ level: "info", data: `reversing ${text.length} characters` });
  return { content: [{ type: "text", text: [...text].reverse().join("") }] };
});
server.registerResource("motd", "note://motd", { mimeType: "text/plain" }, async (uri) => ({ contents: [{ uri: uri.href, text: "stdio says hi" }] }));
await server.connect(new StdioServerTransport());
