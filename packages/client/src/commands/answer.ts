// PLACEHOLDER, replaced by issue 4: `diverge answer --proxy ws://… --mcp http://…/mcp`.
export const answerUsage = "  answer     relay a proxy's MCP asks to an MCP server (not built yet)";
export async function runAnswer(_args: string[]): Promise<number> {
  process.stderr.write("diverge answer is not built yet\n");
  return 1;
}
