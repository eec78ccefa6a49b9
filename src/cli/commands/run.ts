import type { Command } from 'commander';
import { z } from 'zod';
import { UserError } from '../../errors/index.js';
import { runEphemeral } from '../../vm/run.js';
import { exitCodeOf } from '../../vm/exec.js';
import { machineService, progress } from '../context.js';
import { terminalIo } from '../exec-io.js';
import { addMachineOptions, addTerminalOptions, durationSchema, parseFlags, specFromFlags, terminalFlags } from '../machine-options.js';

export const runOptionsSchema = z.object({
  ...terminalFlags,
  name: z.string().optional(),
  bootTimeout: durationSchema.optional(),
  coldBoot: z.boolean().optional(),
}).passthrough();

/** `smol run -- CMD…`: boot a throwaway machine, run one command, remove the machine however it ends. */
export function register(program: Command): void {
  addTerminalOptions(addMachineOptions(program.command('run'))
    .description('run a command in a new throwaway microVM; its exit code becomes smol\'s')
    .argument('[command...]', 'command and arguments (after --)'))
    .option('--name <name>', 'name for the throwaway machine')
    .option('--boot-timeout <duration>', 'how long to wait for the guest (default 60s)')
    .option('--cold-boot', 'boot the kernel instead of restoring the saved boot snapshot')
    .action(async (command: string[], opts: Record<string, unknown>) => {
      const o = parseFlags(runOptionsSchema, opts);
      const spec = specFromFlags(opts);
      const argv = command.length ? command : spec.command;
      if (!argv?.length) throw new UserError('no command given', { hint: 'Usage: smol run [options] -- CMD [ARGS…]' });
      const term = terminalIo({ interactive: o.interactive, tty: o.tty, timeoutMs: o.timeout });
      const p = progress();
      try {
        const res = await runEphemeral(machineService(), spec, {
          argv, tty: term.tty, rows: process.stdout.rows, cols: process.stdout.columns,
        }, { ...term.io, onStart: (h) => { p.done(); term.io.onStart?.(h); } }, { name: o.name, bootTimeoutMs: o.bootTimeout, coldBoot: o.coldBoot, signal: term.signal, onProgress: (m) => p.update(m) });
        process.exitCode = exitCodeOf(res);
      } finally {
        p.done();
        term.restore();
      }
    });
}
