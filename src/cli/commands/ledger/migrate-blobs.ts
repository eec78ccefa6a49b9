import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { NotFoundError, UserError } from '../../../errors/index.js';
import { IntegrityError } from '../../../ledger/errors.js';
import { FileBlobStore } from '../../../ledger/file-blobs.js';
import { migrateBlobs, type MigrateReport } from '../../../ledger/migrate-blobs.js';
import { isPostgresUrl, resolveLedger } from '../../../ledger/open.js';
import { isS3Url, parseS3Url } from '../../../ledger/s3-client.js';
import { PostgresBlobStore } from '../../../ledger/postgres-blobs.js';
import { smolHome } from '../../../util/paths.js';
import { formatBytes, printJson } from '../../output.js';
import { ledgerOption, withLedger } from './open.js';

export const migrateBlobsSchema = z.strictObject({ ledger: z.string().optional(), from: z.string().optional(), to: z.string().min(1).optional(), json: z.boolean().optional() });

/** The directory blobs were kept in before: $SMOL_BLOBS when it names one, else $SMOL_HOME/blobs. */
function defaultFrom(env: NodeJS.ProcessEnv): string {
  return env.SMOL_BLOBS && env.SMOL_BLOBS !== 'postgres' && !isS3Url(env.SMOL_BLOBS) ? path.resolve(env.SMOL_BLOBS) : path.join(smolHome(env), 'blobs');
}

/** Copies into an S3 bucket: no ledger is opened, since its rows name digests and digests do not move. */
async function toS3(src: FileBlobStore, url: string, ledger: string): Promise<MigrateReport> {
  const { S3BlobStore } = await import('../../../ledger/s3-blobs.js');
  const to = new S3BlobStore(url, { cacheDir: resolveLedger(ledger, { ...process.env, SMOL_BLOBS: url }).blobs, from: '--to' });
  try {
    return await migrateBlobs(src, to);
  } finally {
    to.close();
  }
}

export function register(parent: Command): void {
  ledgerOption(parent.command('migrate-blobs')
    .description('copy a blob directory (files and small.db) into a PostgreSQL ledger\'s blob tables, or an S3 bucket with --to; safe to rerun or interrupt')
    .option('--from <dir>', 'the blob directory to copy (default $SMOL_BLOBS, else $SMOL_HOME/blobs)')
    .option('--to <url>', 'copy into s3://BUCKET/PREFIX instead (then run every command with --blobs s3://BUCKET/PREFIX)')
    .option('--json', 'print the counts as JSON'))
    .action(async (raw: unknown) => {
      const opts = migrateBlobsSchema.parse(raw);
      if (opts.to !== undefined && !isS3Url(opts.to)) throw new UserError(`--to takes an s3://BUCKET/PREFIX URL, not ${opts.to}`, { where: '--to', hint: 'Leave --to out to copy into the PostgreSQL ledger\'s own blob tables.' });
      if (opts.to) parseS3Url(opts.to, '--to');
      const ledger = resolveLedger(opts.ledger, { ...process.env, SMOL_BLOBS: '' }).ledger;
      if (!opts.to && !isPostgresUrl(ledger)) {
        throw new UserError(`migrate-blobs moves blobs into a PostgreSQL ledger, and ${ledger} is a SQLite ledger (which keeps its blobs in files)`, { where: '--ledger', hint: 'Pass --ledger postgres://… or set $SMOL_LEDGER to the PostgreSQL URL.' });
      }
      const from = path.resolve(opts.from ?? defaultFrom(process.env));
      if (!fs.existsSync(from) || !fs.statSync(from).isDirectory()) throw new NotFoundError(`no blob directory at ${from}`, { where: '--from', hint: 'Point --from at the directory that holds the <aa>/<hex> blob files (and small.db).' });
      const src = new FileBlobStore(from);
      // whatever $SMOL_BLOBS says, the destination is --to, else the ledger's own blob tables
      const report = opts.to ? await toS3(src, opts.to, ledger).finally(() => src.close()) : await withLedger(ledger, async (l) => {
        if (!(l.blobs instanceof PostgresBlobStore)) throw new UserError('the ledger did not open its PostgreSQL blob store', { where: '$SMOL_BLOBS', hint: 'Unset SMOL_BLOBS (or set it to "postgres") while migrating.' });
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
        throw new IntegrityError(`${report.failed.length} blob(s) in ${from} could not be copied (listed above); the others are in ${report.to}`, { where: from, hint: 'A file whose bytes do not hash to its name is damaged: restore it from a backup or drop it, then rerun.' });
      }
    });
}
