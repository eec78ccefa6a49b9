/**
 * `smol mcp`: smol's machines as Model Context Protocol tools over stdio, for a coding agent's sandbox.
 * stdout carries JSON-RPC and nothing else: anything else written there breaks the client's framing, so the
 * process's own stdout is rerouted to stderr and only the transport keeps the real one.
 */
import { Writable } from 'node:stream';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { InterruptedError } from '../errors/index.js';
import { ABORT_CLEANUP_MS } from '../vm/api/limits.js';
import type { MachineService } from '../vm/api/machines.js';
import { guarded } from './results.js';
import { openMachineService } from './service.js';
import { registerCommandTools } from './tools/commands.js';
import { registerFileTools } from './tools/files.js';
import { registerMachineTools } from './tools/machines.js';
import type { ToolContext } from './tools/context.js';

export const SERVER_INSTRUCTIONS = 'Each smol machine is an isolated Linux microVM (its own kernel) on this host. '
  + 'Use run for a one-off command in a fresh machine; use create_machine, then exec, read_file and write_file, to keep a sandbox across calls, '
  + 'fork to branch it, and remove_machine when done. Machines have no network unless created with net: true.';

export function createMcpServer(ctx: ToolContext, version: string): McpServer {
  const server = new McpServer({ name: 'smol', version }, { instructions: SERVER_INSTRUCTIONS });
  registerCommandTools(server, ctx);
  registerMachineTools(server, ctx);
  registerFileTools(server, ctx);
  return server;
}

/** Serve on stdin/stdout until the client closes stdin (or SIGINT/SIGTERM); in-flight runs are then ended. */
export async function serveStdio(version: string): Promise<void> {
  const rpcOut = claimStdout();
  const shutdown = new AbortController();
  let svc: MachineService | undefined;
  const inflight = new Set<Promise<unknown>>();
  const ctx: ToolContext = {
    svc: () => (svc ??= openMachineService()),
    call: (fn) => {
      const p = guarded(fn);
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
      return p;
    },
    signal: (call) => AbortSignal.any([call, shutdown.signal]),
    progress: (msg) => { if (process.env.SMOL_VERBOSE === '1') process.stderr.write(`smol mcp: ${msg}\n`); },
  };
  const server = createMcpServer(ctx, version);
  const transport = new StdioServerTransport(process.stdin, rpcOut);
  const closed = new Promise<void>((resolve) => {
    const end = (code: 130 | 143 | 0) => () => {
      shutdown.abort(new InterruptedError(code === 143 ? 'terminated' : 'interrupted', code || 130));
      resolve();
    };
    process.stdin.once('end', end(0));
    process.stdin.once('close', end(0));
    process.once('SIGINT', end(130));
    process.once('SIGTERM', end(143));
  });
  transport.onerror = (err) => process.stderr.write(`smol mcp: ${err.message}\n`);
  await server.connect(transport);
  process.stderr.write('smol mcp: serving on stdio\n');
  await closed;
  // aborted calls remove their throwaway machines on the way out: wait for that, within the same bound the CLI gives it
  const bound = new Promise((resolve) => setTimeout(resolve, ABORT_CLEANUP_MS).unref());
  await Promise.race([Promise.allSettled([...inflight]), bound]);
  await server.close().catch(() => undefined);
}

/** The real stdout for the protocol alone; every other writer (console.log, a library's print) lands on stderr. */
function claimStdout(): Writable {
  const realWrite = process.stdout.write.bind(process.stdout) as (chunk: unknown, cb: (err?: Error | null) => void) => boolean;
  process.stdout.write = process.stderr.write.bind(process.stderr) as typeof process.stdout.write;
  return new Writable({ write: (chunk, _enc, cb) => { realWrite(chunk, cb); } });
}
