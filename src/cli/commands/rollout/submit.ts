import type { Command } from 'commander';
import { z } from 'zod';
import { readManifestFile, submitRollout } from '../../../rollout/submit.js';
import { printJson } from '../../output.js';
import { blobsEnv, blobsOption, ledgerOption, withLedger } from '../ledger/open.js';

export const submitSchema = z.strictObject({ ledger: z.string().optional(), blobs: z.string().min(1).optional(), json: z.boolean().optional() });

export function register(parent: Command): void {
  blobsOption(ledgerOption(parent.command('submit')
    .description('submit a rollout manifest (idempotent: the same manifest again changes nothing)')
    .argument('<manifest>', 'rollout manifest YAML')
    .option('--json', 'print the result as JSON')))
    .action(async (file: string, raw: unknown) => {
      const opts = submitSchema.parse(raw);
      const text = readManifestFile(file);
      const r = await withLedger(opts.ledger, (l) => submitRollout(l.ledger, l.blobs, text, file), blobsEnv(opts.blobs));
      if (opts.json) printJson(r);
      else if (r.created) process.stdout.write(`submitted rollout ${r.rolloutId}: ${r.items} items queued (manifest ${r.manifestDigest.slice(0, 19)})\n`);
      else process.stdout.write(`rollout ${r.rolloutId} already submitted with this manifest; nothing changed\n`);
    });
}
