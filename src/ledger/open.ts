/**
 * Opens the ledger a command or service should use (--ledger PATH|URL, then $SMOL_LEDGER, then
 * $SMOL_HOME/ledger.db) and its blob store: files beside a SQLite ledger, rows of a PostgreSQL ledger (so
 * a worker on another host, with another home, reads the same blobs), a directory named by $SMOL_BLOBS, or
 * an S3 bucket named by $SMOL_BLOBS=s3://bucket/prefix (the CLI's --blobs sets it).
 */
import fs from 'node:fs';
import path from 'node:path';
import { dataPaths, smolHome } from '../util/paths.js';
import type { BlobStore } from './blobs.js';
import { FileBlobStore } from './file-blobs.js';
import { blobMaxBytes } from './blob-common.js';
import { LedgerLocationError } from './errors.js';
import { isS3Url, parseS3Url } from './s3-client.js';
import { SqliteLedger } from './sqlite.js';
import type { Ledger } from './types.js';

export interface LedgerLocation {
  ledger: string;
  /** Which blob store: 'postgres' (a PostgreSQL ledger's default), 'files' (SQLite's, or $SMOL_BLOBS=DIR), 's3' ($SMOL_BLOBS=s3://…). */
  blobStore: 'files' | 'postgres' | 's3';
  /** The file store's directory; for the PostgreSQL and S3 stores, the local cache fileOf() streams blobs into. */
  blobs: string;
  /** The S3 store's s3://bucket/prefix. */
  blobsUrl?: string;
  backend: 'sqlite' | 'postgres';
  /** 'full' (SMOL_LEDGER_SYNC=full): commits and blobs survive power loss; 'normal': they survive process crashes. */
  sync: 'normal' | 'full';
}

export function isPostgresUrl(s: string): boolean {
  return /^postgres(ql)?:\/\//.test(s);
}

/** A postgres:// URL fit for messages: the password replaced by ***. */
export const redactUrl = (url: string): string => url.replace(/:[^:@/]*@/, ':***@');

export function resolveLedger(explicit?: string, env: NodeJS.ProcessEnv = process.env): LedgerLocation {
  const ledger = explicit || env.SMOL_LEDGER || path.join(smolHome(env), 'ledger.db');
  const sync = env.SMOL_LEDGER_SYNC === 'full' ? 'full' : 'normal';
  const named = env.SMOL_BLOBS || undefined;
  if (named && isS3Url(named)) {
    parseS3Url(named, '$SMOL_BLOBS'); // a malformed URL is a usage error before anything opens
    const backend = isPostgresUrl(ledger) ? 'postgres' : 'sqlite';
    return { ledger: backend === 'postgres' ? ledger : path.resolve(ledger), backend, sync, blobStore: 's3', blobs: dataPaths(smolHome(env)).blobCache, blobsUrl: named };
  }
  if (isPostgresUrl(ledger)) {
    // $SMOL_BLOBS=DIR keeps a directory every host mounts (how blobs were shared before they lived in PostgreSQL)
    if (named && named !== 'postgres') return { ledger, backend: 'postgres', sync, blobStore: 'files', blobs: path.resolve(named) };
    return { ledger, backend: 'postgres', sync, blobStore: 'postgres', blobs: dataPaths(smolHome(env)).blobCache };
  }
  const file = path.resolve(ledger);
  if (named === 'postgres') throw new LedgerLocationError('SMOL_BLOBS=postgres needs a PostgreSQL ledger', { where: '$SMOL_BLOBS', hint: 'Unset SMOL_BLOBS (a SQLite ledger keeps its blobs beside it) or point --ledger at a postgres:// URL.' });
  return { ledger: file, backend: 'sqlite', sync, blobStore: 'files', blobs: named ? path.resolve(named) : path.join(path.dirname(file), 'blobs') };
}

export interface OpenLedger { ledger: Ledger; blobs: BlobStore; location: LedgerLocation }

const HINT = 'Point --ledger or $SMOL_LEDGER at a file in a writable directory (or $SMOL_HOME at a writable directory; $SMOL_BLOBS for blobs).';

function why(p: string, err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EROFS') return `${p} is on a read-only filesystem`;
  if (code === 'EACCES' || code === 'EPERM') return `${p} is not writable (permission denied)`;
  if (code === 'ENOTDIR') return `${p} is not a directory`;
  return `${p} cannot be created or written: ${(err as Error).message}`;
}

/**
 * Makes `dir` one level at a time and proves it writable, so an unwritable place is one error naming it.
 * Not mkdirSync({recursive}): under /proc a new directory fails with ENOENT, which Node's recursive mkdir
 * takes for a missing parent and retries forever.
 */
function ensureWritableDir(dir: string, where: string): void {
  // "a/file/sub" is ENOTDIR, not ENOENT: both mean "not there yet" while looking for the first existing ancestor
  const exists = (p: string) => {
    try {
      return fs.statSync(p, { throwIfNoEntry: false }) !== undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return false;
      throw err;
    }
  };
  const missing: string[] = [];
  let d = path.resolve(dir);
  try {
    while (!exists(d) && path.dirname(d) !== d) {
      missing.unshift(d);
      d = path.dirname(d);
    }
    // stat follows symlinks, as mkdir and SQLite will: a link to a directory is a directory
    if (!fs.statSync(d).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
  } catch (err) {
    throw fail(d, err, where);
  }
  for (const m of missing) {
    try {
      fs.mkdirSync(m);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw fail(m, err, where);
    }
  }
  try {
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (err) {
    throw fail(path.resolve(dir), err, where);
  }
}

const fail = (p: string, err: unknown, where: string) => new LedgerLocationError(`opening the ledger failed: ${why(p, err)}`, { where, hint: HINT, cause: err });

function openSqlite(location: LedgerLocation): Ledger {
  ensureWritableDir(path.dirname(location.ledger), location.ledger);
  ensureWritableDir(location.blobs, location.ledger);
  try {
    // an existing ledger is written by every command, reads included (WAL): say so before SQLite's "unable to open"
    if (fs.existsSync(location.ledger)) fs.accessSync(location.ledger, fs.constants.R_OK | fs.constants.W_OK);
  } catch (err) {
    throw fail(location.ledger, err, location.ledger);
  }
  try {
    return new SqliteLedger({ path: location.ledger, synchronous: location.sync });
  } catch (err) {
    // a ledger file or WAL that is there but read-only, or a directory that stopped being writable meanwhile
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && (code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_READONLY'))) {
      throw new LedgerLocationError(`opening the ledger failed: ${location.ledger} cannot be opened for writing (${code})`, { where: location.ledger, hint: HINT, cause: err });
    }
    throw err;
  }
}

export async function openLedger(explicit?: string, env: NodeJS.ProcessEnv = process.env): Promise<OpenLedger> {
  const location = resolveLedger(explicit, env);
  const maxBytes = blobMaxBytes(env);
  if (location.blobStore === 's3') {
    // loaded lazily so nobody else loads the AWS SDK
    const { S3BlobStore } = await import('./s3-blobs.js');
    const blobs = new S3BlobStore(location.blobsUrl!, { cacheDir: location.blobs, maxBytes, env });
    try {
      if (location.backend === 'postgres') {
        const { PostgresLedger } = await import('./postgres.js');
        return { ledger: await PostgresLedger.connect({ url: location.ledger }), blobs, location };
      }
      return { ledger: openSqlite(location), blobs, location };
    } catch (err) {
      blobs.close();
      throw err;
    }
  }
  if (location.backend === 'postgres') {
    // loaded lazily so SQLite users never load pg
    const { PostgresLedger } = await import('./postgres.js');
    const ledger = await PostgresLedger.connect({ url: location.ledger });
    if (location.blobStore === 'postgres') {
      const { PostgresBlobStore } = await import('./postgres-blobs.js');
      return { ledger, blobs: new PostgresBlobStore(ledger.pool, { where: redactUrl(location.ledger), cacheDir: location.blobs, maxBytes }), location };
    }
    // small blobs as rows need one host (WAL): a directory shared across hosts keeps every blob a file
    return { ledger, blobs: new FileBlobStore(location.blobs, location.sync === 'full', { inline: false, maxBytes }), location };
  }
  const ledger = openSqlite(location);
  return { ledger, blobs: new FileBlobStore(location.blobs, location.sync === 'full', { maxBytes }), location };
}
