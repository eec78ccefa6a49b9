import type { Command } from 'commander';
import { z } from 'zod';
import { IntegrityError } from '../../../ledger/errors.js';
import { checkLedger } from '../../../ledger/check.js';
import { printJson, printTable } from '../../output.js';
import { BLOBS_HELP, blobsEnv, ledgerOption, withLedger } from './open.js';

export const checkSchema = z.strictObject({ ledger: z.string().optional(), json: z.boolean().optional(), blobs: z.union([z.boolean(), z.string().min(1)]).optional() });

export function register(parent: Command): void {
  ledgerOption(parent.command('check')
    .description('check the ledger\'s integrity: SQLite pages, invariants (one result per key, attempts ≤ max), blobs in whichever store is in use')
    // `--blobs` alone verifies the store in use; `--blobs s3://…` names the store too, as the other commands' --blobs does
    .option('--blobs [url|dir]', `also stream and re-hash every referenced blob, and count the store's unreferenced (orphan) blobs; with a value, the ${BLOBS_HELP}`)
    .option('--json', 'print the report as JSON'))
    .action(async (raw: unknown) => {
      const opts = checkSchema.parse(raw);
      const report = await withLedger(opts.ledger, (l) => checkLedger(l, { verifyBlobs: opts.blobs !== undefined && opts.blobs !== false }), blobsEnv(typeof opts.blobs === 'string' ? opts.blobs : undefined));
      if (opts.json) printJson(report);
      else if (report.issues.length === 0) {
        const orphans = report.orphans ? `, ${report.orphans.count} orphan blob(s)` : '';
        process.stdout.write(`ok: ${report.location} (${report.backend}), ${report.items} items, ${report.results} results, ${report.blobsChecked} blobs checked in ${report.blobStore.kind} store ${report.blobStore.where}${orphans}\n`);
      }
      else printTable(['check', 'problem'], report.issues.map((i) => [i.check, i.detail]));
      if (report.issues.length) throw new IntegrityError(`ledger check found ${report.issues.length} problem(s)`, { where: report.location });
    });
}
