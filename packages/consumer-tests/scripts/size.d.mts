// Types for size.mjs, for the tests.
export interface Row {
  readonly id: string;
  readonly what: string;
  readonly entry: string;
  readonly source: string;
  readonly platform: "browser" | "node";
}
export interface Measured extends Row {
  readonly text: string;
  readonly minified: number;
  readonly gzipped: number;
}
export const sizesFile: string;
export const rows: readonly Row[];
export function bundle(row: Pick<Row, "id" | "source" | "platform">): Promise<string>;
export function measure(): Promise<Measured[]>;
export function table(measured: readonly Measured[]): string;
export function document(measured: readonly Measured[]): string;
export function staleness(measured: readonly Measured[], committedText: string): string[];
export function parse(text: string): Record<string, { minified: number; gzipped: number }>;
