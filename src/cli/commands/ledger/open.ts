/** Shared by the rollout, ledger, worker and gateway commands: the --ledger and --blobs options and opening the ledger. */
import type { Command } from 'commander';
import { openLedger, type OpenLedger } from '../../../ledger/open.js';
import { parseS3Url } from '../../../ledger/s3-client.js';

export function ledgerOption(cmd: Command): Command {
  return cmd.option('--ledger <path|url>', 'ledger file or postgres:// URL (default $SMOL_LEDGER, else $SMOL_HOME/ledger.db)');
}

export const BLOBS_HELP = 'blob store: s3://BUCKET/PREFIX, a directory, or "postgres" (default $SMOL_BLOBS, else the ledger\'s own)';

export function blobsOption(cmd: Command): Command {
  return cmd.option('--blobs <url|dir>', BLOBS_HELP);
}

/** The environment with --blobs in $SMOL_BLOBS (what the ledger reads); an s3:// URL is checked here, naming the flag. */
export function blobsEnv(blobs: string | undefined, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  if (blobs === undefined) return env;
  if (/^s3:/i.test(blobs)) parseS3Url(blobs, '--blobs');
  return { ...env, SMOL_BLOBS: blobs };
}

/** Opens the ledger for one command and always closes it. */
export async function withLedger<T>(explicit: string | undefined, fn: (l: OpenLedger) => Promise<T>, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const l = await openLedger(explicit, env);
  try {
    return await fn(l);
  } finally {
    await l.ledger.close();
    await l.blobs.close();
  }
}
