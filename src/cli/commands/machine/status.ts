import type { Command } from 'commander';
import { machineService } from '../../context.js';
import { printJson } from '../../output.js';
import { machineView } from './view.js';

export function register(parent: Command): void {
  parent.command('status')
    .description('show one machine')
    .argument('<name>', 'machine name')
    .option('--json', 'print as JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      const svc = machineService();
      const v = machineView(svc, svc.refresh(svc.store.get(name)));
      if (opts.json) return printJson(v);
      for (const [k, val] of Object.entries(v)) process.stdout.write(`${k.padEnd(12)} ${val ?? '-'}\n`);
    });
}
