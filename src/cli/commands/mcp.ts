import type { Command } from 'commander';

/** `smol mcp`: a Model Context Protocol server on stdin/stdout, for coding agents (docs/mcp.md). */
export function register(program: Command): void {
  program.command('mcp')
    .description('serve smol machines as Model Context Protocol tools over stdio (run, exec, files, fork) for coding agents')
    .addHelpText('after', `
Started by an MCP client, not by hand: it speaks JSON-RPC on stdin and stdout until stdin closes.
Examples:
  $ claude mcp add smol -- smol mcp                  # Claude Code
  $ npx @modelcontextprotocol/inspector smol mcp     # try the tools in a browser
See docs/mcp.md for Cursor and other clients, the tools and their bounds.
`)
    .action(async () => {
      const { serveStdio } = await import('../../mcp/server.js');
      await serveStdio(program.version() ?? '0.0.0');
    });
}
