import { parseArgs } from "node:util";
import { createServer } from "node:http";
import { createServer as net } from "node:net";
if (process.env.WITH) for (const m of process.env.WITH.split(",")) await import(m);
const a = createServer(); const b = createServer(); const c = net();
await Promise.all([a, b, c].map((s) => new Promise((r) => s.listen(0, "127.0.0.1", r))));
process.stdout.write("listening\n");
