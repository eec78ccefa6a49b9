import type { Command } from 'commander';
import { machineService } from '../../context.js';
import { printJson } from '../../output.js';

export function register(parent: Command): void {
  parent.command('rm')
    .description('remove machines and all their files')
    .argument('<names...>', 'machine names')
    .option('-f, --force', 'stop running machines first')
    .option('--cascade', 'also remove the machine\'s clones (and theirs)')
    .option('--json', 'print what was removed as JSON')
    .action(async (names: string[], opts: { force?: boolean; cascade?: boolean; json?: boolean }) => {
      const svc = machineService();
      const removed: string[] = [];
      for (const n of names) {
        // with --cascade, every clone removed is named too, before its parent
        const gone = await svc.remove(n, { force: opts.force, cascade: opts.cascade });
        removed.push(...gone);
        if (!opts.json) process.stdout.write(gone.map((g) => `${g}\n`).join(''));
      }
      if (opts.json) printJson({ removed });
    });
}
