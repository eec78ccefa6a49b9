import type { Command } from 'commander';
import { pruneAll, pruneArtifacts } from '../../../vm/api/prune.js';
import { machineService } from '../../context.js';
import { printPrune } from '../../prune-output.js';

export function register(parent: Command): void {
  parent.command('prune')
    .description('remove extracted artifacts (cache/artifacts) that no machine uses')
    .option('--dry-run', 'list what would be removed, remove nothing')
    .option('--json', 'print the result as JSON')
    .action(async (opts: { dryRun?: boolean; json?: boolean }) => {
      const svc = machineService();
      printPrune(await pruneAll([(o) => pruneArtifacts(svc, o)], { dryRun: opts.dryRun }), opts.json);
    });
}
