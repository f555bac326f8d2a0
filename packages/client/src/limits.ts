/** The proxy's default message limit (`diverge-proxy --max-message-bytes`): its largest WebSocket message. */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
