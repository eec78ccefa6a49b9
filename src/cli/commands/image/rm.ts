import type { Command } from 'commander';
import { formatBytes, printJson } from '../../output.js';

/** The image service loads on use: `smol image pull` should not pay for sqlite and tar at start-up. */
const manage = () => import('../../../vm/api/images.js');

export function register(parent: Command): void {
  parent.command('rm')
    .alias('remove')
    .description('remove a cached image (a pulled reference, an id, or a directory or archive as `smol image ls` shows it) and the blobs nothing else needs')
    .argument('<ref>', 'reference or image id')
    .option('--json', 'print what was removed as JSON')
    .action(async (ref: string, opts: { json?: boolean }) => {
      const r = await (await manage()).removeImage(ref);
      if (opts.json) return printJson(r);
      process.stdout.write(`removed ${ref} (${r.removed.length} item${r.removed.length === 1 ? '' : 's'}, ${formatBytes(r.bytes)})\n`);
    });
}
