import type { Command } from 'commander';
import { z } from 'zod';
import { UserError } from '../../../errors/index.js';
import { execInMachine, exitCodeOf } from '../../../vm/api/exec.js';
import { machineService } from '../../context.js';
import { terminalIo } from '../../exec-io.js';
import { LinePrefixer } from '../../line-prefix.js';
import { addSecretOptions, addTerminalOptions, envFromList, envListSchema, parseFlags, secretsFromFlags, terminalFlags } from '../../machine-options.js';
import { printJson } from '../../output.js';

const execSchema = z.object({
  env: envListSchema.optional(),
  workdir: z.string().startsWith('/', 'must be an absolute guest path').optional(),
  detach: z.boolean().optional(),
  stream: z.boolean().optional(),
  json: z.boolean().optional(),
  ...terminalFlags,
});

const examples = `
Examples:
  $ smol machine exec web -- uname -a                 # exit code, stdout and stderr pass through
  $ smol machine exec -it web -- sh                   # a terminal (or: smol machine shell web)
  $ smol machine exec -e K=v -w /srv web -- env       # environment and working directory
  $ smol machine exec -d web -- httpd -f -p 80        # background: prints the guest pid, output in /run/smol/exec/PID.log
  $ smol machine exec --stream web -- make test       # CI logs: whole lines, each prefixed with [web]
`;

export function register(parent: Command): void {
  addSecretOptions(addTerminalOptions(parent.command('exec')
    .description('run a command in a running machine; its exit code becomes smol\'s')
    .argument('<name>', 'machine name')
    .argument('<command...>', 'command and arguments (after --)')
    .option('-e, --env <K=V>', 'environment variable (repeatable)', (v: string, p: string[] = []) => [...p, v])
    .option('-w, --workdir <dir>', 'working directory in the guest'))
    .option('-d, --detach', 'start the command in the background in the guest and print its pid')
    .option('--stream', 'line-buffered output, each line prefixed with [NAME] (for CI logs)')
    .option('--json', 'with -d: print {"pid", "log"} as JSON')
    .addHelpText('after', examples))
    .action(async (name: string, command: string[], opts: unknown) => {
      const o = parseFlags(execSchema, opts);
      const secrets = secretsFromFlags(opts);
      const env = envFromList(o.env) ?? {};
      const conflict = o.tty ? '--tty' : o.interactive ? '--interactive' : o.timeout !== undefined ? '--timeout' : null;
      if (o.detach) {
        if (conflict || o.stream) throw new UserError(`${conflict ?? '--stream'} cannot be used with -d`, { where: conflict ?? '--stream', hint: 'A background command has no terminal, stdin or output here: read its log with smol machine exec NAME -- cat /run/smol/exec/PID.log' });
        const { execDetached } = await import('../../../vm/api/exec.js');
        const r = await execDetached(machineService(), name, { argv: command, env, cwd: o.workdir }, { secrets });
        if (o.json) printJson(r);
        else process.stdout.write(`${r.pid}\n`);
        return;
      }
      if (o.stream && o.tty) throw new UserError('--stream cannot be used with -t', { where: '--stream', hint: 'A terminal has no separate lines to prefix; drop one of them.' });
      const term = terminalIo({ interactive: o.interactive, tty: o.tty, timeoutMs: o.timeout });
      const out = o.stream ? new LinePrefixer(`[${name}] `, process.stdout) : process.stdout;
      const err = o.stream ? new LinePrefixer(`[${name}] `, process.stderr) : process.stderr;
      try {
        const res = await execInMachine(machineService(), name, {
          argv: command, env, cwd: o.workdir, tty: term.tty, rows: process.stdout.rows, cols: process.stdout.columns,
        }, { ...term.io, stdout: out, stderr: err }, { secrets });
        process.exitCode = exitCodeOf(res);
      } finally {
        if (out instanceof LinePrefixer) out.flush();
        if (err instanceof LinePrefixer) err.flush();
        term.restore();
      }
    });
}
