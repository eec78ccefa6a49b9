import type { Command } from 'commander';
import { z } from 'zod';
import { machineService } from '../../context.js';
import { parseFlags } from '../../machine-options.js';
import { printJson } from '../../output.js';
import { machineView } from './view.js';
import { pauseMachine } from '../../../vm/api/machines.js';

const pauseSchema = z.object({ toDisk: z.boolean().optional(), json: z.boolean().optional() });

const examples = `
Examples:
  $ smol machine pause web             # vCPUs stop at once; memory stays in QEMU
  $ smol machine pause --to-disk web   # RAM and device state saved in the machine's dir, QEMU ends
  $ smol machine resume web            # continues where it was (machine start does too)
`;

export function register(parent: Command): void {
  parent.command('pause')
    .description('freeze a running machine (in memory, or saved to disk with --to-disk)')
    .argument('<name>', 'machine name')
    .option('--to-disk', 'save RAM and device state to disk and end QEMU: a paused machine then costs only disk')
    .option('--json', 'print the machine as JSON')
    .addHelpText('after', examples)
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(pauseSchema, opts);
      const svc = machineService();
      const rec = await pauseMachine(svc, name, { toDisk: o.toDisk });
      if (o.json) printJson(machineView(svc, rec));
      else process.stdout.write(`${rec.name} paused${o.toDisk ? ' to disk' : ''}\n`);
    });
}
