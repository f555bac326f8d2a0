// Moved to families/mcp-inward/serve-tools.ts (the inward MCP family); this path stays for what imports it.
export * from "./families/mcp-inward/serve-tools.js";
