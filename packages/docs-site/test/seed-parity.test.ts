// Seed parity: the generated pages for the MCP exchanges (seed 000) and for the postgres variant of
// the tools::begin client channel request (seed 004) state every fact the two seed pages state. The
// facts are written here in the project's words; each is checked on the HTML page a reader opens
// and on its Markdown twin under docs/<revision>/.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { docsDir, mainOf, readPage, resolveLink, tablesOf, textOf } from "./site.js";

const REV = "2.3.0";
const MCP = `/${REV}/proxy/mcp/`;
const POSTGRES = `/${REV}/container-proxy-endpoints/tools-begin/client/postgres/request/`;
const CHANNEL_REQUEST = `/${REV}/container-proxy-endpoints/tools-begin/client/channel-request/`;

/** The Markdown of a page as a reader sees it: code ticks, emphasis and link targets dropped. */
function markdownText(url: string): string {
  const md = readFileSync(join(docsDir, url, "index.md"), "utf8");
  return md
    .replace(/<!--[\s\S]*?-->/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/\\\|/g, "|")
    .replace(/[`*]/g, "")
    .replace(/\s+/g, " ");
}

/** Both renderings of a page, for facts that must hold in each. */
function renderings(url: string): [string, string][] {
  return [
    ["html", textOf(mainOf(readPage(url)))],
    ["markdown", markdownText(url)],
  ];
}

function expectFacts(url: string, facts: readonly (string | RegExp)[]): void {
  for (const [kind, text] of renderings(url)) {
    const missing = facts.filter((f) => (typeof f === "string" ? !text.includes(f) : !f.test(text)));
    expect(missing, `${kind} of ${url} lacks facts`).toEqual([]);
  }
}

function tableWith(url: string, headers: readonly string[]) {
  const table = tablesOf(mainOf(readPage(url))).find((t) => t.headers.join("|") === headers.join("|"));
  if (!table) throw new Error(`${url} has no table headed ${headers.join(" | ")}`);
  return table;
}

describe("seed 000: the MCP exchanges", () => {
  const exchanges = [
    { kind: 0, ask: "list tools", payload: "the params as JSON", path: "/mcp/list-tools/{channel}", page: "list-tools", answer: "exactly one message", params: "PaginatedRequestParams" },
    { kind: 1, ask: "list resources", payload: "the params as JSON", path: "/mcp/list-resources/{channel}", page: "list-resources", answer: "exactly one message", params: "PaginatedRequestParams" },
    { kind: 2, ask: "call tool", payload: "the params as JSON", path: "/mcp/call-tool/{channel}", page: "call-tool", answer: "exactly one message", params: "CallToolRequestParams" },
    { kind: 3, ask: "read resource", payload: "the params as JSON", path: "/mcp/read-resource/{channel}", page: "read-resource", answer: "exactly one message", params: "ReadResourceRequestParams" },
    { kind: 4, ask: "notifications", payload: "nothing", path: "/mcp/notifications/{channel}", page: "notifications", answer: "one message per notification", params: undefined },
  ];

  it("has the table Kind | Ask | Payload | Answered on | Answer, each row linking its exchange's page", () => {
    const table = tableWith(MCP, ["Kind", "Ask", "Payload", "Answered on", "Answer"]);
    expect(table.rows.map((r) => r.map((c) => c.text))).toEqual(exchanges.map((x) => [String(x.kind), x.ask, x.payload, x.path, x.answer]));
    for (const [i, x] of exchanges.entries()) {
      const links = table.rows[i]![3]!.hrefs.map((h) => resolveLink(MCP, h));
      expect(links).toEqual([`${MCP}${x.page}/`]);
    }
  });

  it("has the same table in the Markdown", () => {
    const md = readFileSync(join(docsDir, MCP, "index.md"), "utf8");
    expect(md).toContain("| Kind | Ask | Payload | Answered on | Answer |");
    for (const x of exchanges) {
      expect(md).toContain(`| \`${x.kind}\` | ${x.ask} | ${x.payload} | [\`${x.path}\`](${x.page}/index.md) | ${x.answer} |`);
    }
  });

  it("states the summary", () => {
    expectFacts(MCP, [/Kinds 0 to 4: the five MCP exchanges the proxy asks/, /answers four of them with exactly one message each/, /the fifth with one message per notification for as long as its path lives/]);
  });

  it("states the payloads rule: params as JSON of the MCP request type, MCP's types incorporated by reference", () => {
    expectFacts(MCP, [/params payload is the JSON of the exchange's request params/, /Model Context Protocol's own \(revision 2025-11-25\), incorporated by reference/]);
    for (const x of exchanges) {
      if (x.params) expectFacts(`${MCP}${x.page}/`, [x.params, "JSON to the end of the payload"]);
    }
  });

  it("states the answer rule: one message then the close for kinds 0 to 3, a stream ended by an error for kind 4", () => {
    expectFacts(MCP, [
      /For kinds 0 to 3 the provider sends exactly one message on the answer path, the answer frame carrying a result or an error, and then closes the connection/,
      /For kind 4 the provider sends one message per notification for as long as the path lives/,
      /When it sends an error, the error is the last message/,
      /It closes the connection when it has no more to send/,
    ]);
  });

  it("states when an exchange is answered, when it is not, and that it is then asked again", () => {
    expectFacts(MCP, [
      /An exchange is answered when its message has arrived and its path has closed cleanly/,
      /An exchange whose \/requests connection ended before the provider opened its path, and an exchange whose path ended abruptly, are not answered/,
      /asks such an exchange again on the next \/requests connection, under a fresh channel/,
      /a provider may receive one exchange more than once/,
    ]);
  });

  it("states that a clean close with no message is an unserved ask, never asked again", () => {
    expectFacts(MCP, [/A path that the proxy or the provider closes cleanly with no message before the close states that the ask was not served/, /The proxy does not ask an unserved exchange again/]);
  });

  it("states the notification stream's rules: asked after the first exchange, asked again when its path ends, no replay", () => {
    expectFacts(MCP, [
      /The proxy asks for notifications only after it has made its first exchange of kinds 0 to 3/,
      /When a notification path ends, cleanly, by an error, or abruptly, the proxy asks for notifications again on the next \/requests connection/,
      /The provider does not replay a notification that occurred while no notification path was open/,
    ]);
  });

  it("gives every text an answer fails to decode with", () => {
    expectFacts(MCP, ["mcp answer frame is empty", "unknown mcp answer frame tag {tag}", "mcp answer did not parse: {reason}"]);
  });

  it("gives each exchange a page with its ask, answer path, message count and how it ends", () => {
    for (const x of exchanges) {
      const url = `${MCP}${x.page}/`;
      const title = textOf(/<h1[^>]*>([\s\S]*?)<\/h1>/.exec(readPage(url))![1]!);
      expect(title.toLowerCase()).toBe(x.ask);
      expectFacts(url, [
        x.path,
        x.answer,
        `Kind ${x.kind}`,
        `[channel: u32, big-endian][${x.kind}]`,
        /A clean close with no message before it\. The ask was not served; the proxy does not ask it again/,
        /An abrupt end of the path\. The exchange is not answered; the proxy asks the exchange again on the next \/requests connection, under a fresh channel/,
        /\/requests ended before the path was opened\. The exchange is not answered; the proxy asks the exchange again/,
        "mcp answer frame is empty",
        "[0]",
        "[1][error: JSON …]",
      ]);
    }
    expectFacts(`${MCP}notifications/`, [/When a notification path ends, cleanly, by an error, or abruptly/, /When it sends an error, the error is the last message/]);
  });
});

describe("seed 004: the postgres channel request of tools::begin", () => {
  it("lives at its stable path and says what it is", () => {
    expectFacts(POSTGRES, [/The payload of the tools::begin client channel request with tag 0/, /provider's half of a database connection/]);
  });

  it("shows the layout in bracket notation", () => {
    const pres = [...mainOf(readPage(POSTGRES)).matchAll(/<pre><code[^>]*>([\s\S]*?)<\/code><\/pre>/g)].map((m) => textOf(m[1]!));
    expect(pres).toContain("[0][connection_id: u32, big-endian]");
    expect(readFileSync(join(docsDir, POSTGRES, "index.md"), "utf8")).toContain("```text\n[0][connection_id: u32, big-endian]\n```");
  });

  it("documents connection_id: the id the proxy announced on its own postgres channel, four bytes, big-endian", () => {
    expectFacts(POSTGRES, [/connection_id \(u32, big-endian\)\. The id the proxy announced on its own postgres channel, as four bytes, big-endian/, /must be exactly 4 bytes/]);
  });

  it("says how a malformed request is answered", () => {
    expectFacts(POSTGRES, [/Malformed\. A channel request whose payload does not decode as stated is answered by a channel response finish that no channel response precedes, and the proxy does nothing else for it/]);
  });

  it("has the frame's tag table, 0 to 8, linking each variant's page", () => {
    const expected = ["Postgres", "Info", "Daemon", "McpListTools", "McpListResources", "McpCallTool", "McpReadResource", "McpNotifications", "Secrets"];
    for (const url of [POSTGRES, CHANNEL_REQUEST]) {
      const table = tablesOf(mainOf(readPage(url))).find((t) => t.headers[0] === "Tag" && t.headers[1] === "Variant")!;
      expect(table.rows.map((r) => r[0]!.text)).toEqual(expected.map((_, i) => String(i)));
      expect(table.rows.map((r) => r[1]!.text.replace(" (this page)", ""))).toEqual(expected);
      const layouts = table.rows.map((r) => r[2]!.text);
      expect(layouts[0]).toBe("[0][connection_id: u32, big-endian]");
      expect(layouts[1]).toBe("[1][ignored …]");
      expect(layouts[2]).toBe("[2][connection_id: u32, big-endian]");
      expect(layouts[7]).toBe("[7][ignored …]");
      for (const [i, row] of table.rows.entries()) {
        if (url === POSTGRES && i === 0) continue;
        expect(row[1]!.hrefs.length, `${url} row ${i}`).toBe(1);
        const target = resolveLink(url, row[1]!.hrefs[0]!);
        expect(() => readPage(target)).not.toThrow();
      }
    }
  });

  it("gives every decode error of the channel request with its exact text", () => {
    const texts = [
      "tools begin channel request frame is empty",
      "unknown tools begin channel request tag {tag}",
      "postgres connection request is {length} bytes, not 4",
      "daemon connection ask is {length} bytes, not 4",
      "mcp request params did not parse: {reason}",
      "secrets feed did not parse: {reason}",
    ];
    expectFacts(POSTGRES, texts);
    expectFacts(CHANNEL_REQUEST, texts);
    expectFacts(POSTGRES, [/quotes no byte of the input/]);
  });
});
