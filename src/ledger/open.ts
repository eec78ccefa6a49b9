/** Opens the ledger a command or service should use: --ledger PATH|URL, then $SMOL_LEDGER, then $SMOL_HOME/ledger.db. */
import path from 'node:path';
import { smolHome } from '../util/paths.js';
import { BlobStore } from './blobs.js';
import { SqliteLedger } from './sqlite.js';
import type { Ledger } from './types.js';

export interface LedgerLocation {
  ledger: string;
  blobs: string;
  backend: 'sqlite' | 'postgres';
  /** 'full' (SMOL_LEDGER_SYNC=full): commits and blobs survive power loss; 'normal': they survive process crashes. */
  sync: 'normal' | 'full';
}

export function isPostgresUrl(s: string): boolean {
  return /^postgres(ql)?:\/\//.test(s);
}

export function resolveLedger(explicit?: string, env: NodeJS.ProcessEnv = process.env): LedgerLocation {
  const ledger = explicit || env.SMOL_LEDGER || path.join(smolHome(env), 'ledger.db');
  const sync = env.SMOL_LEDGER_SYNC === 'full' ? 'full' : 'normal';
  if (isPostgresUrl(ledger)) return { ledger, backend: 'postgres', sync, blobs: env.SMOL_BLOBS || path.join(smolHome(env), 'blobs') };
  const file = path.resolve(ledger);
  return { ledger: file, backend: 'sqlite', sync, blobs: env.SMOL_BLOBS || path.join(path.dirname(file), 'blobs') };
}

export interface OpenLedger { ledger: Ledger; blobs: BlobStore; location: LedgerLocation }

export async function openLedger(explicit?: string, env: NodeJS.ProcessEnv = process.env): Promise<OpenLedger> {
  const location = resolveLedger(explicit, env);
  let ledger: Ledger;
  if (location.backend === 'postgres') {
    // loaded lazily so SQLite users never load pg
    const { PostgresLedger } = await import('./postgres.js');
    ledger = await PostgresLedger.connect({ url: location.ledger });
  } else {
    ledger = new SqliteLedger({ path: location.ledger, synchronous: location.sync });
  }
  // small blobs as rows need one host (WAL); a PostgreSQL ledger's workers may share the directory across hosts
  return { ledger, blobs: new BlobStore(location.blobs, location.sync === 'full', { inline: location.backend === 'sqlite' }), location };
}
