import type { Command } from 'commander';
import { z } from 'zod';
import { machineService } from '../../context.js';
import { durationSchema, parseFlags } from '../../machine-options.js';
import { printJson } from '../../output.js';
import { machineView } from './view.js';
import { STOP_GRACE_MS } from '../../../vm/api/limits.js';

const stopSchema = z.object({ force: z.boolean().optional(), timeout: durationSchema.optional(), json: z.boolean().optional() });

export function register(parent: Command): void {
  parent.command('stop')
    .description('power a machine off (cleanly, then forcibly after --timeout)')
    .argument('<name>', 'machine name')
    .option('-f, --force', 'kill QEMU at once instead of a clean shutdown')
    .option('--timeout <duration>', `clean shutdown grace period (default ${STOP_GRACE_MS / 1000}s)`)
    .option('--json', 'print the machine as JSON')
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(stopSchema, opts);
      const svc = machineService();
      const rec = await svc.stop(name, { force: o.force, timeoutMs: o.timeout });
      if (o.json) printJson(machineView(svc, rec));
      else process.stdout.write(`${rec.name} stopped\n`);
    });
}
