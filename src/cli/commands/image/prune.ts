import type { Command } from 'commander';
import { formatBytes, printJson } from '../../output.js';

/** The image service loads on use: `smol image pull` should not pay for sqlite and tar at start-up. */
const manage = () => import('../../../vm/api/images.js');

export function register(parent: Command): void {
  parent.command('prune')
    .description('remove cached disks no machine uses (directory and tarball bases, old defaults, untagged pulls), unneeded blobs and leftovers of killed pulls')
    .option('--dry-run', 'list what would be removed, remove nothing')
    .option('-a, --all', 'also remove pulled images no machine uses')
    .option('--json', 'print the result as JSON')
    .action(async (opts: { dryRun?: boolean; all?: boolean; json?: boolean }) => {
      const r = await (await manage()).pruneImages({ dryRun: opts.dryRun, all: opts.all });
      if (opts.json) return printJson(r);
      for (const x of r.removed) process.stdout.write(`${r.dryRun ? 'would remove' : 'removed'} ${x.kind} ${x.what}${x.bytes ? ` (${formatBytes(x.bytes)})` : ''}\n`);
      process.stdout.write(`${r.dryRun ? 'would free' : 'freed'} ${formatBytes(r.bytes)} (${r.removed.length} item${r.removed.length === 1 ? '' : 's'})\n`);
    });
}
