import type { Command } from 'commander';
import { z } from 'zod';
import { pullArtifact } from '../../../artifact/index.js';
import { formatBytes, printJson } from '../../output.js';

export const pullSchema = z.object({ output: z.string().min(1), plainHttp: z.boolean().default(false), force: z.boolean().default(false), json: z.boolean().default(false) }).strict();

export function register(parent: Command): void {
  parent.command('pull')
    .description('pull an artifact from an OCI registry; the blob digest is checked before the file appears')
    .argument('<ref>', 'REGISTRY/NAME[:TAG|@DIGEST]')
    .requiredOption('-o, --output <file>', 'where to write the artifact')
    .option('--plain-http', 'use HTTP instead of HTTPS for a non-loopback registry')
    .option('--force', 'replace the output file if it exists')
    .option('--json', 'print the result as JSON')
    .action(async (ref: string, raw: Record<string, unknown>) => {
      const o = pullSchema.parse(raw);
      const r = await pullArtifact(ref, o.output, { plainHttp: o.plainHttp, force: o.force });
      if (o.json) return printJson(r);
      process.stdout.write(`pulled ${ref} → ${r.out} (${formatBytes(r.size)})\nblob ${r.blobDigest}\nrun \`smol pack verify ${o.output}\` to check its contents and signature\n`);
    });
}
