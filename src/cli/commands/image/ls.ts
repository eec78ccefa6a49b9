import type { Command } from 'commander';
import { formatBytes, printJson, printTable } from '../../output.js';

/** The image service loads on use: `smol image pull` should not pay for sqlite and tar at start-up. */
const manage = () => import('../../../vm/api/images.js');

export function register(parent: Command): void {
  parent.command('ls')
    .alias('list')
    .description('list cached images: pulled references and the disks built from directories, tarballs and pulls')
    .option('--json', 'print as JSON')
    .action(async (opts: { json?: boolean }) => {
      const images = await (await manage()).listImages();
      if (opts.json) return printJson(images);
      if (!images.length) return void process.stdout.write('no cached images (pull one: smol image pull REF)\n');
      printTable(['REF', 'KIND', 'ID', 'DIGEST', 'SIZE', 'USED BY'], images.map((i) => [
        i.ref, i.kind, i.id, i.digest ? i.digest.slice(0, 19) : null, formatBytes(i.size), i.usedBy.join(',') || null,
      ]));
    });
}
