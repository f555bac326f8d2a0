// @diverge/client: the provider side. The many-paths transport lives in paths/, the multiplexed
// connection in multiplexed/.
export {};
