// The exit statuses of every `diverge` command, one per cause, and the one sentence said for each.
import { ContainerError } from "../multiplexed/container.js";
import { ProviderError } from "../paths/errors.js";
import { FilesystemError } from "../families/filesystem/errors.js";
import { ProxyUrlError } from "../url.js";
import { RevisionError } from "@diverge/multiplexer";

export const Exit = {
  /** Done, or stopped by SIGINT/SIGTERM. */
  Ok: 0,
  /** Something this command did not expect (a bug): the message says what. */
  Failed: 1,
  /** The command line was wrong. */
  Usage: 2,
  /** The proxy's one multiplexed connection ended (or the proxy ended the begin scope) while the command needed it. */
  Lost: 3,
  /** The proxy's one multiplexed connection was already used (HTTP 409). */
  AlreadyConnected: 4,
  /** The proxy could not be reached, or refused the upgrade for another reason. */
  Unreachable: 5,
  /** The begin or the secrets feed was refused by the program. */
  Refused: 6,
  /** The exchange failed: an MCP error, not served, an answer that did not decode, or the proxy's own error (filesystem). */
  ExchangeFailed: 7,
  /** A wait ran past --timeout. */
  TimedOut: 8,
  /** Something of the provider's own could not start: the vault, the database, the MCP server, the --serve-tools address. */
  Backend: 9,
} as const;

export type ExitStatus = (typeof Exit)[keyof typeof Exit];

/** The table every command's --help ends with. */
export const exitStatusHelp = `Exit statuses:
  0  done, or stopped by SIGINT/SIGTERM
  1  an unexpected failure (the message says what)
  2  the command line was wrong
  3  the proxy's one multiplexed connection (or its begin scope) was lost
  4  the proxy's one multiplexed connection was already used (restart the proxy, or hold it with \`diverge connect\`)
  5  the proxy could not be reached
  6  the program refused the begin or the secrets
  7  the exchange failed: an MCP error, not served, an unreadable answer, or the proxy's own
     error (a file that is not there, say)
  8  no answer within --timeout
  9  the provider's own backend could not start (vault, database, MCP server, --serve-tools address)
`;

/** The exit status for what a command failed with; its message is the error's own sentence. */
export function exitStatusOf(problem: unknown): ExitStatus {
  if (problem instanceof ContainerError) {
    switch (problem.detail.variant) {
      case "Lost":
        return Exit.Lost;
      case "AlreadyConnected":
        return Exit.AlreadyConnected;
      case "Unreachable":
        return Exit.Unreachable;
      case "Refused":
        return Exit.Refused;
      case "TimedOut":
        return Exit.TimedOut;
      case "Aborted":
        return Exit.Ok;
      case "NotServed":
      case "Mcp":
      case "Unreadable":
      case "NotBegun":
      case "TooLarge":
        return Exit.ExchangeFailed;
    }
  }
  if (problem instanceof FilesystemError) return problem.detail.variant === "Unreachable" ? Exit.Unreachable : Exit.ExchangeFailed;
  if (problem instanceof ProviderError) return problem.detail.variant === "TimedOut" ? Exit.TimedOut : Exit.Unreachable;
  if (problem instanceof ProxyUrlError || problem instanceof RevisionError) return Exit.Usage;
  if (problem instanceof BackendError) return Exit.Backend;
  return Exit.Failed;
}

/** A provider-side backend (vault, database, MCP server, serve-tools listener) that could not start. */
export class BackendError extends Error {
  override readonly name = "BackendError";
  constructor(
    readonly backend: string,
    reason: string,
  ) {
    super(`${backend} could not start: ${reason}`);
  }
}

/** Prints the failure's one sentence and returns its exit status. */
export function fail(problem: unknown): ExitStatus {
  process.stderr.write(`${problem instanceof Error ? problem.message : String(problem)}\n`);
  return exitStatusOf(problem);
}
