/** The machine database: one SQLite file under $SMOL_HOME, shared by every smol process on the host. */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { mapFsError } from '../../errors/index.js';
import { MACHINE_DB_BUSY_MS } from '../limits.js';

const migrations: string[] = [
  `CREATE TABLE machines (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     state TEXT NOT NULL,
     ephemeral INTEGER NOT NULL DEFAULT 0,
     spec TEXT NOT NULL,
     image_id TEXT,
     pid INTEGER,
     owner_pid INTEGER,
     parent TEXT,
     generation INTEGER NOT NULL DEFAULT 0,
     booted INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL,
     started_at INTEGER,
     last_error TEXT
   );
   CREATE TABLE locks (
     machine TEXT PRIMARY KEY,
     pid INTEGER NOT NULL,
     op TEXT NOT NULL,
     acquired_at INTEGER NOT NULL
   );`,
  // live fork: a machine's active overlay moves on at each fork (the old one freezes as the clones' base),
  // and clones point at the fork point whose memory template and device state they were made from
  `ALTER TABLE machines ADD COLUMN disk_file TEXT;
   ALTER TABLE machines ADD COLUMN fork_point TEXT;
   CREATE TABLE fork_points (
     id TEXT PRIMARY KEY,
     machine TEXT NOT NULL,
     frozen_disk TEXT,
     mem_file TEXT NOT NULL,
     mem_owned INTEGER NOT NULL,
     state_file TEXT NOT NULL,
     vm TEXT NOT NULL,
     created_at INTEGER NOT NULL
   );`,
  // labels (docs/labels.md): a JSON object of strings, filtered in `machine ls --filter label=…`;
  // secrets_at: when the running machine last received a secret (never the value: docs/secrets.md), so a
  // fork or a memory pack of a machine whose RAM may hold one is refused until it restarts
  `ALTER TABLE machines ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
   ALTER TABLE machines ADD COLUMN secrets_at INTEGER;`,
  // saved fork points (docs/fork.md): named, kept without clones, self-contained (own disk layer, the spec and
  // the agent port the clones connect on), so the machine they came from may change, stop or go
  `ALTER TABLE fork_points ADD COLUMN name TEXT;
   ALTER TABLE fork_points ADD COLUMN source TEXT;
   CREATE UNIQUE INDEX fork_points_name ON fork_points(name) WHERE name IS NOT NULL;`,
];

export type Db = Database.Database;

export function openMachineDb(file: string): Db {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma(`busy_timeout = ${MACHINE_DB_BUSY_MS}`);
    db.pragma('synchronous = NORMAL');
    migrate(db);
    return db;
  } catch (err) {
    throw mapFsError(err, `opening the machine database ${file}`);
  }
}

/**
 * The version is read inside the write transaction: two processes opening a fresh file together (two workers
 * starting at once) would otherwise both see version 0 and the second would run each migration again.
 */
function migrate(db: Db): void {
  const step = db.transaction((): boolean => {
    const v = db.pragma('user_version', { simple: true }) as number;
    if (v >= migrations.length) return false;
    db.exec(migrations[v]);
    db.pragma(`user_version = ${v + 1}`);
    return true;
  });
  while (step.immediate());
}
