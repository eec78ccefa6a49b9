import type { Command } from 'commander';
import { UserError } from '../../../errors/index.js';
import { machineService, progress } from '../../context.js';
import { addMachineOptions, specFromFlags } from '../../machine-options.js';
import { printJson } from '../../output.js';
import { machineView } from './view.js';

export function register(parent: Command): void {
  addMachineOptions(parent.command('create'))
    .description('create a persistent machine (its disk survives stop/start)')
    .argument('<name>', 'machine name')
    .option('--from <file>', 'create it from a .smolmachine artifact')
    .option('--start', 'start it right away')
    .option('--json', 'print the machine as JSON')
    .action(async (name: string, opts: { start?: boolean; json?: boolean; from?: string; image?: string }) => {
      if (opts.from && opts.image) throw new UserError('--from and --image both name the image; pass one');
      const spec = specFromFlags(opts.from ? { ...opts, image: opts.from } : opts);
      const svc = machineService();
      const p = progress(opts.json);
      try {
        let rec = await svc.create(spec, { name, onProgress: (m) => p.update(m) });
        if (opts.start) rec = await svc.start(rec.id, { onProgress: (m) => p.update(m) });
        p.done();
        if (opts.json) printJson(machineView(svc, rec));
        else process.stdout.write(`${rec.name}\n`);
      } catch (err) {
        p.fail();
        throw err;
      }
    });
}
