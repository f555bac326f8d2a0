// PLACEHOLDER, replaced by issue 9: the example tool-container program.
export {};
