import type { Command } from 'commander';
import { z } from 'zod';
import { execInMachine, exitCodeOf } from '../../../vm/api/exec.js';
import { refuseRestart } from '../../../vm/api/machines.js';
import { machineService, progress } from '../../context.js';
import { terminalIo } from '../../exec-io.js';
import { envFromList, envListSchema, parseFlags } from '../../machine-options.js';

const shellSchema = z.object({ env: envListSchema.optional(), workdir: z.string().startsWith('/', 'must be an absolute guest path').optional() });

/**
 * `smol machine shell NAME`: a login shell with a terminal, starting the machine first when it is stopped.
 * Without a terminal on stdin (a pipe), the shell reads its commands from it, as `sh -l < file` would.
 */
export function register(parent: Command): void {
  parent.command('shell')
    .alias('sh')
    .description('open a login shell (/bin/sh -l) in a machine, starting it if it is stopped; the shell\'s exit code becomes smol\'s')
    .argument('<name>', 'machine name')
    .option('-e, --env <K=V>', 'environment variable (repeatable)', (v: string, p: string[] = []) => [...p, v])
    .option('-w, --workdir <dir>', 'working directory in the guest')
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(shellSchema, opts);
      const svc = machineService();
      const rec = svc.refresh(svc.store.get(name));
      if (rec.state !== 'running') {
        refuseRestart(rec);
        const p = progress();
        try {
          await svc.start(rec.id, { onProgress: (m) => p.update(m) });
        } finally {
          p.done();
        }
      }
      const term = terminalIo({ interactive: true, tty: true });
      try {
        const res = await execInMachine(svc, rec.id, {
          argv: ['/bin/sh', '-l'], env: envFromList(o.env) ?? {}, cwd: o.workdir, tty: term.tty, rows: process.stdout.rows, cols: process.stdout.columns,
        }, term.io);
        process.exitCode = exitCodeOf(res);
      } finally {
        term.restore();
      }
    });
}
