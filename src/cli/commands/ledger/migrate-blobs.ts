import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { NotFoundError, UserError } from '../../../errors/index.js';
import { IntegrityError } from '../../../ledger/errors.js';
import { FileBlobStore } from '../../../ledger/file-blobs.js';
import { migrateBlobs } from '../../../ledger/migrate-blobs.js';
import { isPostgresUrl, resolveLedger } from '../../../ledger/open.js';
import { PostgresBlobStore } from '../../../ledger/postgres-blobs.js';
import { smolHome } from '../../../util/paths.js';
import { formatBytes, printJson } from '../../output.js';
import { ledgerOption, withLedger } from './open.js';

export const migrateBlobsSchema = z.strictObject({ ledger: z.string().optional(), from: z.string().optional(), json: z.boolean().optional() });

/** The directory blobs were kept in before: $SMOL_BLOBS when it names one, else $SMOL_HOME/blobs. */
function defaultFrom(env: NodeJS.ProcessEnv): string {
  return env.SMOL_BLOBS && env.SMOL_BLOBS !== 'postgres' ? path.resolve(env.SMOL_BLOBS) : path.join(smolHome(env), 'blobs');
}

export function register(parent: Command): void {
  ledgerOption(parent.command('migrate-blobs')
    .description('copy a blob directory (files and small.db) into a PostgreSQL ledger\'s blob tables; safe to rerun or interrupt')
    .option('--from <dir>', 'the blob directory to copy (default $SMOL_BLOBS, else $SMOL_HOME/blobs)')
    .option('--json', 'print the counts as JSON'))
    .action(async (raw: unknown) => {
      const opts = migrateBlobsSchema.parse(raw);
      const ledger = resolveLedger(opts.ledger).ledger;
      if (!isPostgresUrl(ledger)) {
        throw new UserError(`migrate-blobs moves blobs into a PostgreSQL ledger, and ${ledger} is a SQLite ledger (which keeps its blobs in files)`, { where: '--ledger', hint: 'Pass --ledger postgres://… or set $SMOL_LEDGER to the PostgreSQL URL.' });
      }
      const from = path.resolve(opts.from ?? defaultFrom(process.env));
      if (!fs.existsSync(from) || !fs.statSync(from).isDirectory()) throw new NotFoundError(`no blob directory at ${from}`, { where: '--from', hint: 'Point --from at the directory that holds the <aa>/<hex> blob files (and small.db).' });
      // whatever $SMOL_BLOBS says, the destination is the ledger's own blob tables
      const report = await withLedger(ledger, async (l) => {
        if (!(l.blobs instanceof PostgresBlobStore)) throw new UserError('the ledger did not open its PostgreSQL blob store', { where: '$SMOL_BLOBS', hint: 'Unset SMOL_BLOBS (or set it to "postgres") while migrating.' });
        const src = new FileBlobStore(from);
        try {
          return await migrateBlobs(src, l.blobs);
        } finally {
          src.close();
        }
      }, { ...process.env, SMOL_BLOBS: 'postgres' });
      if (opts.json) printJson(report);
      else process.stdout.write(`${report.scanned} blobs in ${report.from}: ${report.copied} copied (${formatBytes(report.bytes)}), ${report.present} already in ${report.to}, ${report.failed.length} failed\n`);
      if (report.failed.length) {
        if (!opts.json) for (const f of report.failed) process.stderr.write(`  ${f.digest}: ${f.error}\n`);
        throw new IntegrityError(`${report.failed.length} blob(s) in ${from} could not be copied (listed above); the others are in PostgreSQL`, { where: from, hint: 'A file whose bytes do not hash to its name is damaged: restore it from a backup or drop it, then rerun.' });
      }
    });
}
