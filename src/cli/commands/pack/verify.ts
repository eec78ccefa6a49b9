import type { Command } from 'commander';
import { z } from 'zod';
import { describeFailure, verifyArtifact } from '../../../artifact/index.js';
import { ArtifactError } from '../../../errors/index.js';
import { formatBytes, printJson, printTable } from '../../output.js';

export const verifySchema = z.object({ key: z.string().min(1).optional(), json: z.boolean().default(false) }).strict();

export function register(parent: Command): void {
  parent.command('verify')
    .description('check every digest of an artifact and its signature; names the entry that failed')
    .argument('<file>', '.smolmachine file')
    .option('--key <pub>', 'require a valid signature by this ed25519 public key')
    .option('--json', 'print the per-entry results as JSON')
    .action(async (file: string, raw: Record<string, unknown>) => {
      const o = verifySchema.parse(raw);
      const r = await verifyArtifact(file, { publicKey: o.key });
      if (o.json) {
        printJson(r);
      } else {
        printTable(['ENTRY', 'KIND', 'STORED', 'RESULT'], [
          ...r.entries.map((e) => [e.name, e.kind, formatBytes(e.bytes), e.ok ? 'ok' : 'CORRUPT']),
          ['(framing)', '', '', r.framing.ok ? 'ok' : 'ALTERED'],
          ['(signature)', '', '', `${r.signature.status}${r.signature.keyId ? ` (key ${r.signature.keyId})` : ''}`],
        ]);
        const mbps = r.size / 1e6 / Math.max(r.seconds, 1e-6);
        process.stdout.write(`${r.ok ? 'verified' : 'FAILED'}: ${formatBytes(r.size)} in ${(r.seconds * 1000).toFixed(0)} ms (${mbps.toFixed(0)} MB/s)\n`);
      }
      if (!r.ok) throw new ArtifactError(describeFailure(r), { where: `${file}: ${r.failed[0]}` });
    });
}
