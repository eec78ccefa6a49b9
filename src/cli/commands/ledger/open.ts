/** Shared by the rollout, ledger, worker and gateway commands: the --ledger option and opening it. */
import type { Command } from 'commander';
import { openLedger, type OpenLedger } from '../../../ledger/open.js';

export function ledgerOption(cmd: Command): Command {
  return cmd.option('--ledger <path|url>', 'ledger file or postgres:// URL (default $SMOL_LEDGER, else $SMOL_HOME/ledger.db)');
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
