import type { Command } from 'commander';
import { Option } from 'commander';
import { z } from 'zod';
import { UserError } from '../../errors/index.js';
import { runEphemeral } from '../../vm/api/run.js';
import { exitCodeOf } from '../../vm/api/exec.js';
import { BOOT_TIMEOUT_MS } from '../../vm/api/limits.js';
import { machineService, progress } from '../context.js';
import { terminalIo } from '../exec-io.js';
import { addMachineOptions, addTerminalOptions, durationSchema, parseFlags, specFromFlags, terminalFlags } from '../machine-options.js';

export const runOptionsSchema = z.object({
  ...terminalFlags,
  name: z.string().optional(),
  bootTimeout: durationSchema.optional(),
  coldBoot: z.boolean().optional(),
  detach: z.boolean().optional(),
  rm: z.boolean().optional(),
  supervise: z.string().optional(),
  report: z.string().optional(),
}).passthrough();

const examples = `
Examples:
  $ smol run -- uname -a                          # a throwaway machine for one command
  $ echo hi | smol run -- cat                     # stdin is forwarded
  $ smol run -it -- sh                            # a terminal
  $ smol run --mem 1G -e K=v -w /tmp -- env       # resources, environment, working directory
  $ smol run -v ./src:/work -w /work -- make      # a host directory over virtiofs
  $ smol run -d --name job -- sh -c 'sleep 60'    # detached: prints the name and returns
  $ smol machine logs -f job                      # follow a detached run's output
`;

/** `smol run -- CMD…`: boot a throwaway machine, run one command, remove the machine however it ends. */
export function register(program: Command): void {
  addTerminalOptions(addMachineOptions(program.command('run'))
    .description('run a command in a new throwaway microVM; its exit code becomes smol\'s')
    .argument('[command...]', 'command and arguments (after --)'))
    .option('--name <name>', 'name for the throwaway machine')
    .option('--boot-timeout <duration>', `how long to wait for the guest (default ${BOOT_TIMEOUT_MS / 1000}s)`)
    .option('--cold-boot', 'boot the kernel instead of restoring the saved boot snapshot')
    .option('-d, --detach', 'start the command in the background: print the machine\'s name and return')
    .option('--rm', 'remove the machine when its command exits (the default, also with -d)')
    .option('--no-rm', 'with -d: keep the stopped machine, its output and exit code until `smol machine rm`')
    .addOption(new Option('--supervise <id>').hideHelp())
    .addOption(new Option('--report <file>').hideHelp())
    .addHelpText('after', examples)
    .action(async (command: string[], opts: Record<string, unknown>) => {
      const o = parseFlags(runOptionsSchema, opts);
      if (o.supervise) {
        const { superviseDetached } = await import('../../vm/api/run.js');
        return superviseDetached(machineService(), o.supervise, o.report ?? '/dev/null');
      }
      const spec = specFromFlags(opts);
      const argv = command.length ? command : spec.command;
      if (!argv?.length) throw new UserError('no command given', { hint: 'Usage: smol run [options] -- CMD [ARGS…]' });
      if (o.rm === false && !o.detach) throw new UserError('--no-rm needs -d', { where: '--no-rm', hint: 'A foreground run always removes its machine; keep one with: smol run -d --no-rm -- CMD' });
      if (o.detach) return runDetached(spec, argv, o);
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

async function runDetached(spec: ReturnType<typeof specFromFlags>, argv: string[], o: z.output<typeof runOptionsSchema>): Promise<void> {
  if (o.tty || o.interactive) {
    throw new UserError(`${o.tty ? '-t' : '-i'} cannot be used with -d`, { where: o.tty ? '--tty' : '--interactive', hint: 'A detached command has no terminal or stdin; open a shell in it instead: smol machine shell NAME' });
  }
  const { startDetached } = await import('../../vm/api/run.js');
  const { InterruptedError } = await import('../../errors/index.js');
  const ctl = new AbortController();
  const onSig = (code: 130 | 143) => () => ctl.abort(new InterruptedError(code === 130 ? 'interrupted' : 'terminated', code));
  const sigint = onSig(130);
  const sigterm = onSig(143);
  process.on('SIGINT', sigint);
  process.on('SIGTERM', sigterm);
  const p = progress();
  p.update('starting the detached machine');
  try {
    const rec = await startDetached(machineService(), spec, {
      req: { argv }, rm: o.rm !== false, timeoutMs: o.timeout, bootTimeoutMs: o.bootTimeout, coldBoot: o.coldBoot,
    }, {
      name: o.name, signal: ctl.signal,
      supervisorArgv: (id, report) => [process.execPath, process.argv[1], 'run', '--supervise', id, '--report', report],
    });
    p.done();
    process.stdout.write(`${rec.name}\n`);
  } finally {
    p.done();
    process.off('SIGINT', sigint);
    process.off('SIGTERM', sigterm);
  }
}
