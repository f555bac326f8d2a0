// DIVERGE.md on the multiplexed connection: one channel of the begin scope (provider-opened tag 1).
import type { ConnectionHost } from "../../multiplexed/host.js";
import type { RequestOptions } from "../../waiting.js";
import { typedInfo, type ContainerInfo } from "./front-matter.js";

/** The container's `DIVERGE.md`, parsed; undefined when the image has none. */
export async function askInfo(connection: ConnectionHost, options?: RequestOptions): Promise<ContainerInfo | undefined> {
  const answer = await connection.askChannel("info", () => connection.asks.info({}), options, () => "the proxy's reading of DIVERGE.md");
  if (answer.variant !== "Info") return undefined;
  return typedInfo(answer.info);
}
