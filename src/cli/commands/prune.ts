import type { Command } from 'commander';
import { pruneAll, pruners } from '../../vm/api/prune.js';
import { machineService } from '../context.js';
import { printPrune } from '../prune-output.js';

/** `smol prune`: machine leftovers, boot snapshots and cached artifacts nothing uses (docs/prune.md). */
export function register(program: Command): void {
  program.command('prune')
    .description('remove what no machine uses: throwaway leftovers, boot snapshots, cached artifacts')
    .option('--dry-run', 'list what would be removed, remove nothing')
    .option('--json', 'print the result as JSON')
    .action(async (opts: { dryRun?: boolean; json?: boolean }) => {
      printPrune(await pruneAll(pruners(machineService()), { dryRun: opts.dryRun }), opts.json);
    });
}
