/** Numbered, append-only migrations for the PostgreSQL ledger; `smol_schema` records the applied ones. */
export const postgresMigrations: readonly string[] = [
  // 1: the initial schema (times are BIGINT milliseconds from the server's clock, like the SQLite ledger)
  `
  CREATE FUNCTION smol_now_ms() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
  CREATE TABLE manifests (digest TEXT PRIMARY KEY, body TEXT NOT NULL, created_at BIGINT NOT NULL);
  CREATE TABLE rollouts (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, manifest_digest TEXT NOT NULL REFERENCES manifests(digest), env_version TEXT NOT NULL,
    gpus INTEGER NOT NULL DEFAULT 1, status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active','canceled')),
    created_at BIGINT NOT NULL, canceled_at BIGINT
  );
  CREATE TABLE items (
    id BIGSERIAL PRIMARY KEY, rollout_id TEXT NOT NULL REFERENCES rollouts(id), stage TEXT NOT NULL, stage_index INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('cpu','gpu')), sample_id TEXT NOT NULL, input_ref TEXT NOT NULL, input_version TEXT NOT NULL,
    env_version TEXT NOT NULL, idem_key TEXT NOT NULL UNIQUE, max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    timeout_ms BIGINT NOT NULL, backoff_ms BIGINT NOT NULL, deadline_at BIGINT,
    status TEXT NOT NULL CHECK (status IN ('queued','leased','done','dead','canceled')), attempt INTEGER NOT NULL DEFAULT 0,
    run_after BIGINT NOT NULL, lease_token TEXT, lease_owner TEXT, lease_expires_at BIGINT, last_error TEXT,
    created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL
  );
  CREATE INDEX items_ready ON items(status, kind, run_after);
  CREATE INDEX items_lease ON items(status, lease_expires_at);
  CREATE INDEX items_rollout ON items(rollout_id, status);
  CREATE TABLE attempts (
    item_id BIGINT NOT NULL REFERENCES items(id), attempt INTEGER NOT NULL, token TEXT NOT NULL, worker TEXT NOT NULL,
    started_at BIGINT NOT NULL, ended_at BIGINT, outcome TEXT NOT NULL, error TEXT, PRIMARY KEY (item_id, attempt)
  );
  CREATE VIEW leases AS SELECT id AS item_id, attempt, lease_token AS token, lease_owner AS worker, lease_expires_at AS expires_at FROM items WHERE status = 'leased';
  CREATE TABLE results (
    idem_key TEXT PRIMARY KEY, item_id BIGINT NOT NULL REFERENCES items(id), rollout_id TEXT NOT NULL, stage TEXT NOT NULL,
    sample_id TEXT NOT NULL, attempt INTEGER NOT NULL, output_ref TEXT NOT NULL, created_at BIGINT NOT NULL
  );
  CREATE INDEX results_rollout ON results(rollout_id, sample_id);
  CREATE INDEX results_time ON results(created_at);
  CREATE TABLE trajectories (rollout_id TEXT NOT NULL, sample_id TEXT NOT NULL, ref TEXT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (rollout_id, sample_id));
  CREATE TABLE inference_requests (
    idem_key TEXT PRIMARY KEY, request_id TEXT NOT NULL, rollout_id TEXT NOT NULL, request_hash TEXT NOT NULL, model TEXT NOT NULL,
    model_version TEXT NOT NULL, prompt_version TEXT NOT NULL, input_ref TEXT NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending','done','shed','failed')), output_ref TEXT, env_version TEXT, batch_id TEXT,
    batch_size INTEGER, upstream_ms DOUBLE PRECISION, error TEXT, created_at BIGINT NOT NULL, completed_at BIGINT
  );
  CREATE TABLE events (id BIGSERIAL PRIMARY KEY, at BIGINT NOT NULL, kind TEXT NOT NULL, item_id BIGINT, rollout_id TEXT, detail TEXT);
  CREATE INDEX events_kind ON events(kind, at);
  `,
  // 2: blobs, so every host that reaches the ledger reaches its payloads. A blob's row and all its chunks are
  // written in one transaction, before any ledger row names the digest; chunks are bytea rows of at most
  // BLOB_CHUNK_BYTES (limits.ts), so neither side of a read or write holds more than a chunk per round trip.
  // bytea rows rather than large objects: plain tables work on managed PostgreSQL, in logical replication
  // and in pg_dump without --large-objects, and need no lo_unlink to avoid leaks.
  `
  CREATE TABLE blobs (digest TEXT PRIMARY KEY CHECK (digest ~ '^sha256:[0-9a-f]{64}$'), size BIGINT NOT NULL CHECK (size >= 0), chunks INTEGER NOT NULL CHECK (chunks >= 0), created_at BIGINT NOT NULL);
  CREATE TABLE blob_chunks (digest TEXT NOT NULL REFERENCES blobs(digest) ON DELETE CASCADE, seq INTEGER NOT NULL CHECK (seq >= 0), data BYTEA NOT NULL, PRIMARY KEY (digest, seq));
  `,
];
