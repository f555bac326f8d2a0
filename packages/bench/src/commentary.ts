// What the numbers mean, written after reading them. RESULTS.md prints these paragraphs under the tables.
export const commentary: readonly string[] = [];
