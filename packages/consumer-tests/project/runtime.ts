// The runtime packages only (no build tool), as an application on its own versions of the MCP SDK,
// zod and ws uses them: checked by test/ranges.test.ts at the lowest and newest allowed versions.
// Each @ts-expect-error proves a type is real, not `any`.
import { decodePostgresRequest, fromHex, type CallToolResult } from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { answer } from "@diverge/conformance";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, ContainerError, openContainer, relayToMcp, type ContainerInfo, type PathsConnection } from "@diverge/client";
import type { ListToolsResult } from "@modelcontextprotocol/sdk/types.js";

export async function runtime(): Promise<unknown> {
  const proxy: RunningProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  const relay = relayToMcp({ url: "http://127.0.0.1:9/mcp" });
  const paths: PathsConnection = connectProxy(`http://127.0.0.1:${proxy.port}`, relay);
  await paths.whenConnected({ timeoutMs: 1000 });
  const container = await openContainer(`ws://127.0.0.1:${proxy.port}`, { timeoutMs: 1000 });
  await container.beginTools({ arguments: null });
  const info: ContainerInfo | undefined = await container.info();
  // @ts-expect-error secrets are names (strings)
  const wrong: number[] | undefined = info?.frontMatter.secrets;
  let listed: ListToolsResult | undefined;
  try {
    listed = await container.mcp.listTools(undefined, { timeoutMs: 1000 });
  } catch (error) {
    if (!(error instanceof ContainerError)) throw error;
  }
  const result: CallToolResult = { content: [] };
  await container.close();
  await paths.close();
  await relay.close();
  await proxy.close();
  return [wrong, listed, result, decodePostgresRequest(fromHex("00000102"), { check: checkMcp }), answer("{}")];
}
