import type { Command } from 'commander';
import { z } from 'zod';
import { NotFoundError } from '../../../errors/index.js';
import { printJson, printTable } from '../../output.js';
import { blobsEnv, blobsOption, ledgerOption, withLedger } from '../ledger/open.js';

export const resultsSchema = z.strictObject({ ledger: z.string().optional(), blobs: z.string().min(1).optional(), json: z.boolean().optional(), stage: z.string().optional() });

/** Outputs larger than this are shown by reference only (the blob is there; `--json` readers fetch it themselves). */
const INLINE_MAX = 64 * 1024;

export function register(parent: Command): void {
  blobsOption(ledgerOption(parent.command('results')
    .description('list a rollout\'s results: sample, stage, attempt and the output itself (e.g. rewards)')
    .argument('<rollout>', 'rollout id (the manifest name)')
    .option('--stage <name>', 'only this stage\'s results')
    .option('--json', 'print as JSON, one object per result with its output text')))
    .action(async (id: string, raw: unknown) => {
      const opts = resultsSchema.parse(raw);
      const rows = await withLedger(opts.ledger, async (l) => {
        if (!(await l.ledger.getRollout(id))) throw new NotFoundError(`rollout ${id} not found`, { hint: 'List rollouts with `smol rollout ls`.' });
        const results = (await l.ledger.results({ rolloutId: id })).filter((r) => !opts.stage || r.stage === opts.stage);
        return (await Promise.all(results.map(async (r) => {
          const text = await l.blobs.getText(r.outputRef);
          return { sampleId: r.sampleId, stage: r.stage, attempt: r.attempt, outputRef: r.outputRef, output: text.length <= INLINE_MAX ? text : null };
        }))).sort((a, b) => a.sampleId.localeCompare(b.sampleId) || a.stage.localeCompare(b.stage));
      }, blobsEnv(opts.blobs));
      if (opts.json) return printJson(rows);
      printTable(['sample', 'stage', 'attempt', 'output'], rows.map((r) => [r.sampleId, r.stage, r.attempt, r.output === null ? r.outputRef : r.output.trim().split('\n')[0].slice(0, 120)]));
    });
}
