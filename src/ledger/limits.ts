/** The ledger's timeouts and limits in one place, each with why it has its value. */

/** Retry backoff doubles per attempt up to a minute, so a flaky stage still retries within a rollout's patience. */
export const BACKOFF_CAP_MS = 60_000;
/** Expired leases (and past-deadline items) settled per claim: bounds the claim's transaction; the rest wait for the next claim. */
export const RECLAIM_BATCH = 500;
/** Rows a `ledger check` invariant reports at most: enough to see the pattern, short enough to read. */
export const CHECK_ISSUES_MAX = 100;
/** `rollout stats` counts results per second over this window: long enough to smooth batches, short enough to follow a change. */
export const RATE_WINDOW_MS = 10_000;

/** Items per multi-row INSERT on PostgreSQL: one round trip each, far below its 65,535 bind parameters (18 per item). */
export const PG_INSERT_CHUNK = 500;
/** A transaction that hit a serialization failure or deadlock is rerun this many times before the error reaches the caller. */
export const PG_TX_RETRIES = 10;
/** Connections per process by default: a worker's transactions run one after another, and a host runs several workers. */
export const PG_POOL_MAX = 4;
/** A PostgreSQL server that accepts but never answers (a host gone behind a firewall, a stuck proxy) would
 *  otherwise hold a connect for the OS's TCP timeout, minutes; SMOL_PG_CONNECT_TIMEOUT_MS overrides. */
export const PG_CONNECT_TIMEOUT_MS = 10_000;

/** How long a caller waits for the SQLite write lock before LedgerBusyError (SMOL_LEDGER_BUSY_MS overrides). */
export const SQLITE_BUSY_BUDGET_MS = 60_000;
/** How long after the last sign of contention writers keep queueing (a lone writer skips the round trip). */
export const SQLITE_CONTENDED_MS = 1000;
/** How long a writer waits for its turn before polling SQLite instead (the queue's server may be stopped). */
export const SQLITE_TURN_TIMEOUT_MS = 200;
/** SQLite's own autocheckpoint threshold (~4 MB of WAL frames); the checkpointer starts at the same point. */
export const WAL_AUTOCHECKPOINT_FRAMES = 1000;
/** Past this many frames (~16 MB) commits checkpoint inline again: the background thread has fallen behind. */
export const WAL_BEHIND_FRAMES = 4000;
/** How often the checkpointer looks at the WAL index: one pread, so frequent looks are cheap. */
export const CHECKPOINT_INTERVAL_MS = 50;
/** After a checkpoint resets the WAL, the file is truncated back to this size (64 MiB) instead of keeping its peak. */
export const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * A PostgreSQL blob is stored as rows of at most this many bytes (blob_chunks): a reader or writer holds one
 * chunk per round trip, never a whole trajectory, and a row stays far below bytea's 1 GB limit and TOAST's sweet spot.
 */
export const BLOB_CHUNK_BYTES = 1024 * 1024;
/**
 * The largest blob smol writes or reads (SMOL_BLOB_MAX_BYTES overrides): enforced while streaming, so a
 * corrupt or hostile row cannot make a reader allocate without bound. 256 MiB holds any trajectory we have
 * seen many times over and stays below V8's ~512 MiB string limit for getText().
 */
export const BLOB_MAX_BYTES = 256 * 1024 * 1024;
/** Digests per existence query (`ledger check`, `migrate-blobs`): one round trip each. */
export const PG_BLOB_LOOKUP_BATCH = 1000;
