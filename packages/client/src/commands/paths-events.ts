// One line per /requests event, as `diverge answer` and `diverge connect` print them.
import type { PathsConnectionEvent } from "../paths/connect.js";

/**
 * The `onEvent` of a command holding `/requests`: progress lines go to `say` (quiet with --quiet),
 * errors to stderr — except once the command is stopping, when the paths being cut are not news.
 */
export function sayPathsEvents(proxy: string, say: (line: string) => void, stopping: () => boolean): (event: PathsConnectionEvent) => void {
  return (event) => {
    switch (event.type) {
      case "requestsOpened":
        return say(`connected to ${proxy}/requests`);
      case "requestsClosed":
        return say(`/requests ended (${event.ending.clean ? "closed" : "abruptly"})${event.redial ? "; dialling again" : ""}`);
      case "ask":
        return say(`ask ${event.ask.channel}: ${event.ask.variant}`);
      case "pathEnded":
        return say(`${event.path}: ${event.outcome}`);
      case "error":
        if (stopping()) return;
        process.stderr.write(`${event.error.message}\n`);
        return;
    }
  };
}
