import type { Command } from 'commander';
import { z } from 'zod';
import { machineService } from '../../context.js';
import { parseFlags } from '../../machine-options.js';
import { printJson } from '../../output.js';
import { machineView } from './view.js';
import { resumeMachine } from '../../../vm/api/machines.js';

const resumeSchema = z.object({ json: z.boolean().optional() });

export function register(parent: Command): void {
  parent.command('resume')
    .description('continue a paused machine where it was (processes, files, tmpfs; the clock is stepped to now)')
    .argument('<name>', 'machine name')
    .option('--json', 'print the machine as JSON')
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(resumeSchema, opts);
      const svc = machineService();
      const rec = await resumeMachine(svc, name);
      if (o.json) printJson(machineView(svc, rec));
      else process.stdout.write(`${rec.name} resumed\n`);
    });
}
