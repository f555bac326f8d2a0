// A consumer with only @diverge/codec installed (no MCP SDK, no @types/node, no DOM): its types
// must compile with skipLibCheck off, and the MCP-typed fields must be real types. Each expected
// error below proves one: were the field `any` (an unresolved import), the directive would be
// unused, which tsc reports as an error.
import {
  decodeMcpCallToolAnswer,
  decodeToolsBeginChannelRequest,
  encodeMcpCallToolAnswer,
  encodeToolsBeginChannelRequest,
  type CallToolRequestParams,
  type CallToolResult,
  type ServerNotification,
} from "@diverge/codec";

const params: CallToolRequestParams = { name: "query", arguments: { sql: "select 1" } };
const request = decodeToolsBeginChannelRequest(encodeToolsBeginChannelRequest({ variant: "McpCallTool", params }));
if (request.variant === "McpCallTool") {
  const name: string = request.params.name;
  const args: { [key: string]: unknown } | undefined = request.params.arguments;
  // @ts-expect-error name is a string, not a number
  const wrong: number = request.params.name;
  // @ts-expect-error CallToolRequestParams has no member `tool`
  void request.params.tool;
  void name, args, wrong;
}

// @ts-expect-error a tools/call params needs its name
const nameless: CallToolRequestParams = { arguments: {} };

const result: CallToolResult = { content: [{ type: "text", text: "hi" }], isError: false };
const answer = decodeMcpCallToolAnswer(encodeMcpCallToolAnswer({ variant: "Result", result }));
if (answer.variant === "Result") {
  for (const block of answer.result.content) {
    if (block.type === "text") {
      const text: string = block.text;
      void text;
    }
    // @ts-expect-error "video" is no content block type
    if (block.type === "video") void block;
  }
}

// @ts-expect-error a content block's text is a string
const badBlock: CallToolResult = { content: [{ type: "text", text: 7 }] };

function method(notification: ServerNotification): string {
  return notification.method;
}

void nameless, badBlock, method;
