// Compiled (not run) by test/mcp-types.test.ts: the codec's written-out MCP types are exactly the
// MCP SDK's, both ways, and none of them is `any`.
import type * as sdk from "@modelcontextprotocol/sdk/types.js";
import type * as ours from "../../src/gen/2.3.0/mcp-types.js";

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type IsAny<T> = 0 extends 1 & T ? true : false;

export const same: [
  Same<ours.PaginatedRequestParams, sdk.PaginatedRequestParams>,
  Same<ours.CallToolRequestParams, sdk.CallToolRequestParams>,
  Same<ours.ReadResourceRequestParams, sdk.ReadResourceRequestParams>,
  Same<ours.ListToolsResult, sdk.ListToolsResult>,
  Same<ours.ListResourcesResult, sdk.ListResourcesResult>,
  Same<ours.CallToolResult, sdk.CallToolResult>,
  Same<ours.ReadResourceResult, sdk.ReadResourceResult>,
  Same<ours.ServerNotification, sdk.ServerNotification>,
  Same<ours.ErrorData, sdk.JSONRPCErrorResponse["error"]>,
] = [true, true, true, true, true, true, true, true, true];

export const notAny: [
  IsAny<ours.CallToolRequestParams>,
  IsAny<ours.CallToolRequestParams["arguments"]>,
  IsAny<ours.CallToolResult["content"][number]>,
  IsAny<ours.ServerNotification>,
] = [false, false, false, false];

// Fields keep their types: a wrong one is an error.
export function wrong(params: ours.CallToolRequestParams, result: ours.CallToolResult): void {
  // @ts-expect-error name is a string
  const name: number = params.name;
  // @ts-expect-error no such member
  void params.nmae;
  for (const block of result.content) if (block.type === "text") void block.text.toUpperCase();
  void name;
}
