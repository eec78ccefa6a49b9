import type { Command } from 'commander';
import { z } from 'zod';
import { pushArtifact } from '../../../artifact/index.js';
import { formatBytes, printJson } from '../../output.js';

export const pushSchema = z.object({ plainHttp: z.boolean().default(false), json: z.boolean().default(false) }).strict();

export function register(parent: Command): void {
  parent.command('push')
    .description('push an artifact to an OCI registry (loopback registries use plain HTTP)')
    .argument('<file>', '.smolmachine file')
    .argument('<ref>', 'REGISTRY/NAME[:TAG]')
    .option('--plain-http', 'use HTTP instead of HTTPS for a non-loopback registry')
    .option('--json', 'print the result as JSON')
    .action(async (file: string, ref: string, raw: Record<string, unknown>) => {
      const o = pushSchema.parse(raw);
      const r = await pushArtifact(file, ref, { plainHttp: o.plainHttp });
      if (o.json) return printJson(r);
      process.stdout.write(`pushed ${ref} (${formatBytes(r.size)}${r.uploaded ? '' : ', blob already present'})\nmanifest ${r.manifestDigest}\n`);
    });
}
