/**
 * Machine records and per-machine locks. State written here is what `ls` shows after reconciling it with
 * the processes that actually exist, so a crashed smol or QEMU is reported truthfully.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { ConflictError, NotFoundError, UserError } from '../../errors/index.js';
import type { Smolfile } from '../../smolfile/schema.js';
import type { Db } from './db.js';

/** 'paused': vCPUs stopped with QEMU alive, or saved to disk with no QEMU at all (vm/pause.ts). */
export type MachineState = 'creating' | 'stopped' | 'starting' | 'running' | 'stopping' | 'crashed' | 'paused';

export interface MachineRecord {
  id: string;
  name: string;
  state: MachineState;
  ephemeral: boolean;
  spec: Smolfile;
  imageId: string | null;
  pid: number | null;
  ownerPid: number | null;
  parent: string | null;
  generation: number;
  booted: boolean;
  createdAt: number;
  startedAt: number | null;
  lastError: string | null;
  /** The active disk overlay's file name in the machine dir when a fork moved it on (null: disk.qcow2). */
  diskFile: string | null;
  /** For a clone: the fork point it was made from (its memory template and device state). */
  forkPoint: string | null;
  /** User labels (`--label K=V`, Smolfile `labels:`). */
  labels: Record<string, string>;
  /** When the machine last received a secret (run/exec --secret-*); its RAM may hold one until it stops. */
  secretsAt: number | null;
}

/** A running machine whose RAM may hold a secret: it received one since it started. */
export const holdsSecrets = (r: Pick<MachineRecord, 'secretsAt' | 'startedAt'>): boolean =>
  r.secretsAt !== null && r.startedAt !== null && r.secretsAt >= r.startedAt;

interface Row {
  id: string; name: string; state: MachineState; ephemeral: number; spec: string; image_id: string | null;
  pid: number | null; owner_pid: number | null; parent: string | null; generation: number; booted: number;
  created_at: number; started_at: number | null; last_error: string | null; disk_file: string | null; fork_point: string | null;
  labels: string | null; secrets_at: number | null;
}

const fromRow = (r: Row): MachineRecord => ({
  id: r.id, name: r.name, state: r.state, ephemeral: !!r.ephemeral, spec: JSON.parse(r.spec) as Smolfile,
  imageId: r.image_id, pid: r.pid, ownerPid: r.owner_pid, parent: r.parent, generation: r.generation,
  booted: !!r.booted, createdAt: r.created_at, startedAt: r.started_at, lastError: r.last_error,
  diskFile: r.disk_file ?? null, forkPoint: r.fork_point ?? null,
  labels: r.labels ? JSON.parse(r.labels) as Record<string, string> : {}, secretsAt: r.secrets_at ?? null,
});

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;

export function validateName(name: string): void {
  if (!NAME_RE.test(name)) {
    throw new UserError(`invalid machine name "${name}"`, { hint: 'Use 1–63 letters, digits, ".", "_" or "-", starting with a letter or digit.' });
  }
}

export function newMachineId(): string {
  return crypto.randomBytes(6).toString('hex');
}

/** True when `pid` is a live process (not a zombie). */
export function pidAlive(pid: number | null | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** The store lock a worker holds while it pulls the artifact pinned by `digest` and saves its point
 *  (rollout/vm-artifact.ts); `smol prune` leaves that artifact alone while it is held (vm/prune/caches.ts). */
export const pulledArtifactLock = (digest: string): string => `artifact:${digest}`;

export class MachineStore {
  constructor(readonly db: Db) {}

  insert(rec: Omit<MachineRecord, 'createdAt' | 'startedAt' | 'lastError' | 'pid' | 'booted' | 'diskFile' | 'forkPoint' | 'labels' | 'secretsAt'> & { forkPoint?: string | null; labels?: Record<string, string> }): MachineRecord {
    validateName(rec.name);
    const now = Date.now();
    try {
      this.db.prepare(`INSERT INTO machines (id, name, state, ephemeral, spec, image_id, owner_pid, parent, generation, created_at, fork_point, labels)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(rec.id, rec.name, rec.state, rec.ephemeral ? 1 : 0, JSON.stringify(rec.spec),
        rec.imageId, rec.ownerPid, rec.parent, rec.generation, now, rec.forkPoint ?? null, JSON.stringify(rec.labels ?? {}));
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE' || (err as { code?: string }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
        throw new ConflictError(`a machine named "${rec.name}" already exists`, { hint: `Pick another name, or remove it first: smol machine rm ${rec.name}` });
      }
      throw err;
    }
    return this.get(rec.name);
  }

  find(nameOrId: string): MachineRecord | null {
    const r = this.db.prepare('SELECT * FROM machines WHERE name = ? OR id = ?').get(nameOrId, nameOrId) as Row | undefined;
    return r ? fromRow(r) : null;
  }

  get(nameOrId: string): MachineRecord {
    const m = this.find(nameOrId);
    if (!m) throw new NotFoundError(`no machine named "${nameOrId}"`, { hint: 'List machines with: smol machine ls' });
    return m;
  }

  list(): MachineRecord[] {
    return (this.db.prepare('SELECT * FROM machines ORDER BY created_at, name').all() as Row[]).map(fromRow);
  }

  update(id: string, fields: Partial<Pick<MachineRecord, 'state' | 'pid' | 'ownerPid' | 'booted' | 'startedAt' | 'lastError' | 'imageId' | 'diskFile' | 'forkPoint' | 'spec' | 'labels' | 'secretsAt'>>): void {
    const cols: Record<string, unknown> = {
      state: fields.state, pid: fields.pid, owner_pid: fields.ownerPid, booted: fields.booted === undefined ? undefined : fields.booted ? 1 : 0,
      started_at: fields.startedAt, last_error: fields.lastError, image_id: fields.imageId, disk_file: fields.diskFile, fork_point: fields.forkPoint,
      spec: fields.spec && JSON.stringify(fields.spec), labels: fields.labels && JSON.stringify(fields.labels), secrets_at: fields.secretsAt,
    };
    const set = Object.entries(cols).filter(([, v]) => v !== undefined);
    if (!set.length) return;
    this.db.prepare(`UPDATE machines SET ${set.map(([k]) => `${k} = ?`).join(', ')} WHERE id = ?`).run(...set.map(([, v]) => v), id);
  }

  delete(id: string): void {
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM locks WHERE machine = ?').run(id);
      this.db.prepare('DELETE FROM machines WHERE id = ?').run(id);
    }).immediate();
  }

  children(id: string): MachineRecord[] {
    return (this.db.prepare('SELECT * FROM machines WHERE parent = ?').all(id) as Row[]).map(fromRow);
  }

  /** The live process holding the machine's lock, if any. */
  lockHolder(id: string): number | null {
    const held = this.db.prepare('SELECT pid FROM locks WHERE machine = ?').get(id) as { pid: number } | undefined;
    return held && pidAlive(held.pid) ? held.pid : null;
  }

  /**
   * Take the machine's lock for an operation. A lock whose holder died is taken over, so a kill -9 of
   * smol never wedges a machine.
   */
  lock(id: string, op: string, name = id): () => void {
    const pid = process.pid;
    this.db.transaction(() => {
      const held = this.db.prepare('SELECT pid, op FROM locks WHERE machine = ?').get(id) as { pid: number; op: string } | undefined;
      if (held && held.pid !== pid && pidAlive(held.pid)) {
        throw new ConflictError(`machine "${name}" is busy: ${held.op} in progress (pid ${held.pid})`, { hint: 'Wait for it to finish, then retry.' });
      }
      this.db.prepare('INSERT OR REPLACE INTO locks (machine, pid, op, acquired_at) VALUES (?, ?, ?, ?)').run(id, pid, op, Date.now());
    }).immediate();
    return () => {
      try {
        this.db.prepare('DELETE FROM locks WHERE machine = ? AND pid = ?').run(id, pid);
      } catch {
        // e.g. SQLITE_FULL on a full disk: the row names this pid, so the next locker takes it over once we
        // exit; failing here would only replace the command's own result with a cleanup error
      }
    };
  }
}
