import type { Command } from 'commander';
import { z } from 'zod';
import { assetsHome } from '../../../util/paths.js';
import { formatBytes, printJson } from '../../output.js';
import { layerProgress } from './layer-progress.js';

export const imagePullSchema = z.object({ offline: z.boolean().default(false), plainHttp: z.boolean().default(false), build: z.boolean().default(true), json: z.boolean().default(false) }).strict();

export function register(parent: Command): void {
  parent.command('pull')
    .description('pull an image from an OCI registry into the local cache (linux/<host arch> of a multi-platform image) and build its disk')
    .argument('<ref>', '[REGISTRY[:PORT]/]NAME[:TAG][@sha256:DIGEST]')
    .option('--offline', 'use only the local cache; fail naming what is missing')
    .option('--plain-http', 'use HTTP instead of HTTPS for a non-loopback registry (or list it in SMOL_INSECURE_REGISTRIES)')
    .option('--no-build', 'stop once the blobs are cached; the disk is built on first use')
    .option('--json', 'print the result as JSON')
    .action(async (ref: string, raw: Record<string, unknown>) => {
      const o = imagePullSchema.parse(raw);
      const progress = await layerProgress(o.json);
      const { pullImage } = await import('../../../vm/api/images.js'); // loaded on use: start-up is part of every pull
      const r = await pullImage(ref, assetsHome(), { offline: o.offline, plainHttp: o.plainHttp, build: o.build, onLayer: progress.onLayer })
        .finally(() => progress.stop());
      const { image, ...rest } = r;
      if (o.json) return printJson({ ...rest, basePath: image?.basePath });
      const cachedN = r.layers.filter((l) => l.cached).length;
      process.stdout.write(`${r.ref}: ${r.manifestDigest} (${r.platform}), ${r.layers.length} layer${r.layers.length === 1 ? '' : 's'}${cachedN ? `, ${cachedN} cached` : ''}; fetched ${formatBytes(r.fetchedBytes)}${o.offline ? ' (offline)' : ''}\n`);
    });
}
