import type { Command } from 'commander';
import { machineService, progress } from '../../context.js';
import { durationSchema, parseFlags } from '../../machine-options.js';
import { printJson, formatDuration } from '../../output.js';
import { z } from 'zod';
import { machineView } from './view.js';
import { refuseRestart } from '../../../vm/api/machines.js';
import { BOOT_TIMEOUT_MS } from '../../../vm/api/limits.js';

const startSchema = z.object({ bootTimeout: durationSchema.optional(), json: z.boolean().optional(), forkable: z.boolean().optional() });

export function register(parent: Command): void {
  parent.command('start')
    .description('boot a stopped machine and wait until its agent answers')
    .argument('<name>', 'machine name')
    .option('--boot-timeout <duration>', `how long to wait for the guest (default ${BOOT_TIMEOUT_MS / 1000}s)`)
    .option('--forkable', 'run so that `smol fork` can clone it')
    .option('--json', 'print the machine as JSON')
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(startSchema, opts);
      const svc = machineService();
      refuseRestart(svc.refresh(svc.store.get(name)));
      const p = progress(o.json);
      const t0 = Date.now();
      try {
        const rec = await svc.start(name, { bootTimeoutMs: o.bootTimeout, forkable: o.forkable, onProgress: (m) => p.update(m) });
        p.done();
        if (o.json) printJson(machineView(svc, rec));
        else process.stdout.write(`${rec.name} running (${formatDuration(Date.now() - t0)})\n`);
      } catch (err) {
        p.fail();
        throw err;
      }
    });
}
