/**
 * Fork points: what clones share. A clone's memory maps the point's template copy-on-write and its disk sits
 * on the point's frozen overlay, so a point lives exactly as long as some machine still names it; the last
 * clone removed releases it (reference counting through the registry, not through the files).
 */
import type { Db } from './db.js';

export interface VmIdentity {
  /** QEMU version string, e.g. "7.2.22". */
  qemu: string;
  accel: 'kvm' | 'tcg';
  /** CPU model the guest runs on (QEMU's -cpu), e.g. "max" or "host". */
  cpu: string;
  /** Guest RAM in MiB: a clone must declare the same size to load the state. */
  memoryMiB: number;
}

export interface ForkPointRecord {
  id: string;
  /** The machine that was forked. */
  machine: string;
  /** The overlay that froze at the fork (the clones' backing file); null for a diskless machine. */
  frozenDisk: string | null;
  /** The memory template the clones map copy-on-write. */
  memFile: string;
  /** True when the template is a copy smol made (deleted with the point), false when it is the held parent's own file. */
  memOwned: boolean;
  /** Device state (migration stream) the clones load. */
  stateFile: string;
  vm: VmIdentity;
  createdAt: number;
}

interface Row {
  id: string; machine: string; frozen_disk: string | null; mem_file: string; mem_owned: number; state_file: string; vm: string; created_at: number;
}

const fromRow = (r: Row): ForkPointRecord => ({
  id: r.id, machine: r.machine, frozenDisk: r.frozen_disk, memFile: r.mem_file, memOwned: !!r.mem_owned,
  stateFile: r.state_file, vm: JSON.parse(r.vm) as VmIdentity, createdAt: r.created_at,
});

export class ForkPointStore {
  constructor(private readonly db: Db) {}

  /** Records the point and makes `clones` reference it in one transaction, so a concurrent release cannot see it unreferenced. */
  insert(fp: Omit<ForkPointRecord, 'createdAt'>, clones: readonly string[]): ForkPointRecord {
    const now = Date.now();
    this.db.transaction(() => {
      this.db.prepare(`INSERT INTO fork_points (id, machine, frozen_disk, mem_file, mem_owned, state_file, vm, created_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)`).run(fp.id, fp.machine, fp.frozenDisk, fp.memFile, fp.memOwned ? 1 : 0, fp.stateFile, JSON.stringify(fp.vm), now);
      const set = this.db.prepare('UPDATE machines SET fork_point = ? WHERE id = ?');
      for (const c of clones) set.run(fp.id, c);
    }).immediate();
    return { ...fp, createdAt: now };
  }

  get(id: string): ForkPointRecord | null {
    const r = this.db.prepare('SELECT * FROM fork_points WHERE id = ?').get(id) as Row | undefined;
    return r ? fromRow(r) : null;
  }

  list(): ForkPointRecord[] {
    return (this.db.prepare('SELECT * FROM fork_points ORDER BY created_at').all() as Row[]).map(fromRow);
  }

  /** How many machines still reference the point. */
  users(id: string): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM machines WHERE fork_point = ?').get(id) as { n: number }).n;
  }

  /**
   * Deletes every point no machine references and returns them, so the caller removes their files after the
   * rows are gone (a crash in between leaves stray files, never a row pointing at missing ones).
   */
  releaseUnreferenced(): ForkPointRecord[] {
    return this.db.transaction(() => {
      const rows = this.db.prepare(`SELECT * FROM fork_points f WHERE NOT EXISTS (SELECT 1 FROM machines m WHERE m.fork_point = f.id)`).all() as Row[];
      const del = this.db.prepare('DELETE FROM fork_points WHERE id = ?');
      for (const r of rows) del.run(r.id);
      return rows.map(fromRow);
    }).immediate();
  }
}
