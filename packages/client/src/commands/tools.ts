// PLACEHOLDER, replaced by issue 9: `diverge tools list|call|resources|read|notifications|info --proxy ws://…`.
export const toolsUsage = "  tools      speak to a tool container through its proxy (not built yet)";
export async function runTools(_args: string[]): Promise<number> {
  process.stderr.write("diverge tools is not built yet\n");
  return 1;
}
