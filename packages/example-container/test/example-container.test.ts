// The example program on its own: /register, /secrets and its MCP server through the SDK's client.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "../src/index.js";

let app: ExampleContainer;
beforeAll(async () => {
  app = await startExampleContainer();
});
afterAll(async () => {
  await app.close();
});

const post = (path: string, body: unknown) => fetch(`${app.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

describe("the example container", () => {
  it("ships a DIVERGE.md at its root", () => {
    expect(existsSync(join(exampleRoot, "DIVERGE.md"))).toBe(true);
  });

  it("refuses arguments without a greeting and declares its tool for good ones", async () => {
    const refused = await post("/register", { nope: 1 });
    expect(refused.status).toBe(422);
    const accepted = await post("/register", { greeting: "Salut" });
    expect(accepted.status).toBe(200);
    const tools = (await accepted.json()) as { name: string; arguments: unknown }[];
    expect(tools.map((tool) => [tool.name, tool.arguments])).toEqual([["greeter", { greeting: "Salut" }]]);
    expect(app.registered).toEqual({ greeting: "Salut" });
  });

  it("takes its secrets only when every required one is there, naming what is missing and no value", async () => {
    const refused = await post("/secrets", { OTHER: "v4lue" });
    expect(refused.status).toBe(422);
    const text = await refused.text();
    expect(text).toContain("API_KEY");
    expect(text).not.toContain("v4lue");
    expect(app.fed).toBe(false);
    expect((await post("/secrets", { API_KEY: "k" })).status).toBe(200);
    expect(app.fed).toBe(true);
  });

  it("serves MCP over Streamable HTTP", async () => {
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${app.url}/mcp`)));
    expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(["greet", "notify", "query"]);
    expect(await client.callTool({ name: "greet", arguments: { name: "Lu" } })).toMatchObject({ content: [{ type: "text", text: "Salut, Lu!" }] });
    const noDatabase = await client.callTool({ name: "query", arguments: { sql: "SELECT 1" } });
    expect(noDatabase.isError).toBe(true);
    expect(app.calls).toContain("tools/call greet");
    await client.close();
  });
});
