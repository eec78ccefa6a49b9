/** `run` (a throwaway machine for one command) and `exec` (a command in a machine the agent keeps). */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { z } from 'zod';
import { UserError } from '../../errors/index.js';
import { mergeSpec } from '../../smolfile/merge.js';
import { resolveImageRef } from '../../util/image-ref.js';
import { execInMachine, exitCodeOf, type ExecIo, type ExecResult } from '../../vm/api/exec.js';
import { runEphemeral } from '../../vm/api/run.js';
import { CappedSink } from '../capture.js';
import { DEFAULT_TIMEOUT_S, OUTPUT_CAP_BYTES } from '../limits.js';
import { commandResult } from '../results.js';
import { commandResultSchema, execInputSchema, runInputSchema } from '../schemas.js';
import type { ToolContext } from './context.js';

type CommandArgs = Pick<z.output<typeof runInputSchema>, 'argv' | 'command'>;

/** argv runs as given; a command string runs under the guest's shell, as an agent writing `a | b` expects. */
export function argvOf(a: CommandArgs, tool: string): string[] {
  if (a.argv && a.command !== undefined) throw new UserError('give argv or command, not both', { where: `${tool}.argv`, hint: 'argv runs a program directly; command runs a shell line with /bin/sh -c.' });
  if (a.argv) return a.argv;
  if (a.command !== undefined) return ['/bin/sh', '-c', a.command];
  throw new UserError('no command given', { where: tool, hint: 'Pass argv, e.g. ["uname", "-a"], or command, e.g. "ls -l / | head".' });
}

/** Output captured to the caps, the timeout applied, and the call's cancellation ending the command. */
async function captured(signal: AbortSignal, timeoutS: number | undefined, go: (io: ExecIo) => Promise<ExecResult>) {
  const stdout = new CappedSink(OUTPUT_CAP_BYTES);
  const stderr = new CappedSink(OUTPUT_CAP_BYTES);
  const res = await go({ stdin: null, stdout, stderr, timeoutMs: (timeoutS ?? DEFAULT_TIMEOUT_S) * 1000, signal });
  return commandResult({
    exitCode: exitCodeOf(res), timedOut: res.timedOut,
    stdout: stdout.text(), stderr: stderr.text(), stdoutTruncated: stdout.truncated, stderrTruncated: stderr.truncated,
  });
}

export function registerCommandTools(server: McpServer, ctx: ToolContext): void {
  server.registerTool('run', {
    title: 'Run a command in a throwaway microVM',
    description: 'Boot a fresh, isolated Linux microVM, run one command in it, and remove the machine. Nothing persists between calls: to keep files or processes, use create_machine and exec. Returns the exit code, stdout and stderr (each capped at 1 MiB).',
    inputSchema: runInputSchema,
    outputSchema: commandResultSchema,
    annotations: { destructiveHint: false, openWorldHint: false },
  }, (a, extra) => ctx.call(async () => {
    const argv = argvOf(a, 'run');
    const spec = mergeSpec(undefined, undefined, { image: a.image && resolveImageRef(a.image, process.cwd()), cpus: a.cpus, memory: a.memory, net: a.net });
    return captured(ctx.signal(extra.signal), a.timeout, (io) =>
      runEphemeral(ctx.svc(), spec, { argv, env: a.env, cwd: a.workdir }, io, { signal: io.signal, onProgress: ctx.progress }));
  }));

  server.registerTool('exec', {
    title: 'Run a command in a machine',
    description: 'Run a command in a running machine made by create_machine. Files and background processes persist between calls. Returns the exit code, stdout and stderr (each capped at 1 MiB). Has no stdin.',
    inputSchema: execInputSchema,
    outputSchema: commandResultSchema,
    annotations: { destructiveHint: true, openWorldHint: false },
  }, (a, extra) => ctx.call(async () => {
    const argv = argvOf(a, 'exec');
    return captured(ctx.signal(extra.signal), a.timeout, (io) =>
      execInMachine(ctx.svc(), a.machine, { argv, env: a.env, ...(a.workdir ? { cwd: a.workdir } : {}) }, io));
  }));
}
