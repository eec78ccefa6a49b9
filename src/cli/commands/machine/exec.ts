import type { Command } from 'commander';
import { z } from 'zod';
import { execInMachine, exitCodeOf } from '../../../vm/exec.js';
import { machineService } from '../../context.js';
import { terminalIo } from '../../exec-io.js';
import { addSecretOptions, addTerminalOptions, envFromList, envListSchema, parseFlags, secretsFromFlags, terminalFlags } from '../../machine-options.js';

const execSchema = z.object({
  env: envListSchema.optional(),
  workdir: z.string().startsWith('/', 'must be an absolute guest path').optional(),
  ...terminalFlags,
});

export function register(parent: Command): void {
  addSecretOptions(addTerminalOptions(parent.command('exec')
    .description('run a command in a running machine; its exit code becomes smol\'s')
    .argument('<name>', 'machine name')
    .argument('<command...>', 'command and arguments (after --)')
    .option('-e, --env <K=V>', 'environment variable (repeatable)', (v: string, p: string[] = []) => [...p, v])
    .option('-w, --workdir <dir>', 'working directory in the guest')))
    .action(async (name: string, command: string[], opts: unknown) => {
      const o = parseFlags(execSchema, opts);
      const secrets = secretsFromFlags(opts);
      const env = envFromList(o.env) ?? {};
      const term = terminalIo({ interactive: o.interactive, tty: o.tty, timeoutMs: o.timeout });
      try {
        const res = await execInMachine(machineService(), name, {
          argv: command, env, cwd: o.workdir, tty: term.tty, rows: process.stdout.rows, cols: process.stdout.columns,
        }, term.io, { secrets });
        process.exitCode = exitCodeOf(res);
      } finally {
        term.restore();
      }
    });
}
