import { createServer } from "node:http";
const f = (m) => Object.fromEntries(Object.entries(m).map(([k, v]) => [k, (v / 1e6).toFixed(1)]));
const v8 = await import("node:v8");
const sp = () => Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, (s.physical_space_size / 1e6).toFixed(1)]));
console.log("before", f(process.memoryUsage()), sp());
for (const m of (process.env.WITH ?? "").split(",").filter(Boolean)) await import(m);
console.log("after ", f(process.memoryUsage()), sp());
