/**
 * Numbered, append-only migrations for the SQLite ledger. Never edit a shipped migration; add the next one.
 * `PRAGMA user_version` records how far a file has been migrated.
 */
export const sqliteMigrations: readonly string[] = [
  // 1: the initial schema
  `
  CREATE TABLE manifests (
    digest TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) STRICT;
  CREATE TABLE rollouts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    manifest_digest TEXT NOT NULL REFERENCES manifests(digest),
    env_version TEXT NOT NULL,
    gpus INTEGER NOT NULL DEFAULT 1,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active','canceled')),
    created_at INTEGER NOT NULL,
    canceled_at INTEGER
  ) STRICT;
  CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    rollout_id TEXT NOT NULL REFERENCES rollouts(id),
    stage TEXT NOT NULL,
    stage_index INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('cpu','gpu')),
    sample_id TEXT NOT NULL,
    input_ref TEXT NOT NULL,
    input_version TEXT NOT NULL,
    env_version TEXT NOT NULL,
    idem_key TEXT NOT NULL UNIQUE,
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    timeout_ms INTEGER NOT NULL,
    backoff_ms INTEGER NOT NULL,
    deadline_at INTEGER,
    status TEXT NOT NULL CHECK (status IN ('queued','leased','done','dead','canceled')),
    attempt INTEGER NOT NULL DEFAULT 0,
    run_after INTEGER NOT NULL,
    lease_token TEXT,
    lease_owner TEXT,
    lease_expires_at INTEGER,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX items_ready ON items(status, kind, run_after);
  CREATE INDEX items_lease ON items(status, lease_expires_at);
  CREATE INDEX items_rollout ON items(rollout_id, status);
  CREATE TABLE attempts (
    item_id INTEGER NOT NULL REFERENCES items(id),
    attempt INTEGER NOT NULL,
    token TEXT NOT NULL,
    worker TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    outcome TEXT NOT NULL,
    error TEXT,
    PRIMARY KEY (item_id, attempt)
  ) STRICT, WITHOUT ROWID;
  -- The current lease lives on the item row (one row to update per claim); this view names it.
  CREATE VIEW leases AS
    SELECT id AS item_id, attempt, lease_token AS token, lease_owner AS worker, lease_expires_at AS expires_at
    FROM items WHERE status = 'leased';
  CREATE TABLE results (
    idem_key TEXT PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES items(id),
    rollout_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    output_ref TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX results_rollout ON results(rollout_id, sample_id);
  CREATE INDEX results_time ON results(created_at);
  CREATE TABLE trajectories (
    rollout_id TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    ref TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (rollout_id, sample_id)
  ) STRICT;
  CREATE TABLE inference_requests (
    idem_key TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    rollout_id TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    model_version TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    input_ref TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending','done','shed','failed')),
    output_ref TEXT,
    env_version TEXT,
    batch_id TEXT,
    batch_size INTEGER,
    upstream_ms REAL,
    error TEXT,
    created_at INTEGER NOT NULL,
    completed_at INTEGER
  ) STRICT;
  CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    kind TEXT NOT NULL,
    item_id INTEGER,
    rollout_id TEXT,
    detail TEXT
  ) STRICT;
  CREATE INDEX events_kind ON events(kind, at);
  `,
  // 2: partial indexes, so enqueueing touches no lease index and finished items leave the ready index
  `
  DROP INDEX items_ready;
  CREATE INDEX items_ready ON items(kind, run_after) WHERE status = 'queued';
  DROP INDEX items_lease;
  CREATE INDEX items_lease ON items(lease_expires_at) WHERE status = 'leased';
  `,
];
