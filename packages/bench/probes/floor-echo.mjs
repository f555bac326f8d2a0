// The echo side of floor-probe.mjs: answers each message with itself, on a TCP socket or a WebSocket.
import net from "node:net";
import { WebSocketServer } from "ws";
if (process.argv[2] === "ws") {
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1" }, () => process.send(server.address().port));
  server.on("connection", (c) => c.on("message", (m) => c.send(m)));
} else {
  const server = net.createServer((c) => (c.setNoDelay(true), c.on("data", (d) => c.write(d)))).listen(0, "127.0.0.1", () => process.send(server.address().port));
}
