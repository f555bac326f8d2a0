// PLACEHOLDER, replaced by issues 4 and 9: pnpm demo.
export {};
