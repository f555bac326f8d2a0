// One line per /requests event, as `diverge answer` and `diverge connect` print them.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import type { PathsConnectionEvent } from "../paths/connect.js";

/**
 * The `onEvent` of a command holding `/requests`: progress lines go to `say` (quiet with --quiet),
 * errors to stderr — except once the command is stopping, when the paths being cut are not news.
 */
export function sayPathsEvents(
  proxy: string,
  say: Say,
  stopping: () => boolean,
  error: Say = (line) => void process.stderr.write(`${line}\n`),
): (event: PathsConnectionEvent) => void {
  return (event) => {
    switch (event.type) {
      case "requestsOpened":
        return say(...logEvent("connected to {proxy}/requests", { proxy }));
      case "requestsClosed":
        return say(`/requests ended (${event.ending.clean ? "closed" : "abruptly"})${event.redial ? "; dialling again" : ""}`);
      case "ask":
        return say(...logEvent(`ask ${event.ask.channel}: {variant}`, { variant: event.ask.variant }));
      case "pathEnded":
        return say(...logEvent("{path}: {outcome}", { path: event.path, outcome: event.outcome }));
      case "error":
        if (stopping()) return;
        error(...logEvent("{error}", { error: event.error.message }));
        return;
    }
  };
}
