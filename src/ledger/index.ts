/** Public surface of the ledger (src/index.ts re-exports what programs need). */
export * from './types.js';
export { BlobStore, FileBlobStore, BlobTooLargeError, blobMaxBytes, digestOf, isDigest, type Awaitable } from './blobs.js';
export { SqliteLedger, type SqliteLedgerOptions } from './sqlite.js';
export { openLedger, resolveLedger, isPostgresUrl, type OpenLedger, type LedgerLocation } from './open.js';
export { LedgerBusyError, IntegrityError, LedgerVersionError } from './errors.js';
// type only: pg loads lazily through openLedger('postgres://…')
export type { PostgresLedger } from './postgres.js';
export { checkLedger, type CheckReport } from './check.js';
