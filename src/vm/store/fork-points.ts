/**
 * Fork points: what clones share. A clone's memory maps the point's template copy-on-write and its disk sits
 * on the point's frozen overlay, so a point lives exactly as long as some machine still names it; the last
 * clone removed releases it (reference counting through the registry, not through the files).
 */
import type { Smolfile } from '../../smolfile/schema.js';
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
  /** A saved point's name (`smol fork NAME --save POINT`); null for the anonymous point of a plain fork. */
  name: string | null;
  /** What a saved point's clones are made from, so they need nothing of the machine it came from. */
  source: PointSource | null;
}

/** Everything a saved point's clone needs that a plain fork reads from its (running) parent. */
export interface PointSource {
  /** The machine's name at the save (for display; the machine may be gone). */
  machineName: string;
  spec: Smolfile;
  imageId: string | null;
  /** The agent port the saving smol held in the machine: no guest session was inherited on it. */
  port: number;
  diskSize: number | null;
}

interface Row {
  id: string; machine: string; frozen_disk: string | null; mem_file: string; mem_owned: number; state_file: string; vm: string; created_at: number;
  name: string | null; source: string | null;
}

const fromRow = (r: Row): ForkPointRecord => ({
  id: r.id, machine: r.machine, frozenDisk: r.frozen_disk, memFile: r.mem_file, memOwned: !!r.mem_owned,
  stateFile: r.state_file, vm: JSON.parse(r.vm) as VmIdentity, createdAt: r.created_at,
  name: r.name ?? null, source: r.source ? JSON.parse(r.source) as PointSource : null,
});

export class ForkPointStore {
  constructor(private readonly db: Db) {}

  /** Records the point and makes `clones` reference it in one transaction, so a concurrent release cannot see it unreferenced. */
  insert(fp: Omit<ForkPointRecord, 'createdAt' | 'name' | 'source'> & { name?: string | null; source?: PointSource | null }, clones: readonly string[]): ForkPointRecord {
    const now = Date.now();
    this.db.transaction(() => {
      this.db.prepare(`INSERT INTO fork_points (id, machine, frozen_disk, mem_file, mem_owned, state_file, vm, created_at, name, source)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(fp.id, fp.machine, fp.frozenDisk, fp.memFile, fp.memOwned ? 1 : 0, fp.stateFile, JSON.stringify(fp.vm), now,
        fp.name ?? null, fp.source ? JSON.stringify(fp.source) : null);
      const set = this.db.prepare('UPDATE machines SET fork_point = ? WHERE id = ?');
      for (const c of clones) set.run(fp.id, c);
    }).immediate();
    return { ...fp, name: fp.name ?? null, source: fp.source ?? null, createdAt: now };
  }

  byName(name: string): ForkPointRecord | null {
    const r = this.db.prepare('SELECT * FROM fork_points WHERE name = ?').get(name) as Row | undefined;
    return r ? fromRow(r) : null;
  }

  /** The machines made from the point (its clones), by name. */
  clones(id: string): string[] {
    return (this.db.prepare('SELECT name FROM machines WHERE fork_point = ? ORDER BY created_at').all(id) as { name: string }[]).map((r) => r.name);
  }

  /**
   * Drops a saved point's name, in one transaction with the check, so no clone can start from it afterwards.
   * Refused (returns its clones) while machines use it, unless `force`: then its files go with the last clone.
   */
  unname(name: string, force: boolean): { point: ForkPointRecord | null; clones: string[] } {
    return this.db.transaction(() => {
      const point = this.byName(name);
      if (!point) return { point, clones: [] };
      const clones = this.clones(point.id);
      if (clones.length && !force) return { point, clones };
      this.db.prepare('UPDATE fork_points SET name = NULL WHERE id = ?').run(point.id);
      return { point, clones };
    }).immediate();
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
   * Deletes every unnamed point no machine references and returns them (a saved point stays until
   * `smol snapshot rm`), so the caller removes their files after the
   * rows are gone (a crash in between leaves stray files, never a row pointing at missing ones).
   */
  releaseUnreferenced(): ForkPointRecord[] {
    return this.db.transaction(() => {
      const rows = this.db.prepare(`SELECT * FROM fork_points f WHERE f.name IS NULL AND NOT EXISTS (SELECT 1 FROM machines m WHERE m.fork_point = f.id)`).all() as Row[];
      const del = this.db.prepare('DELETE FROM fork_points WHERE id = ?');
      for (const r of rows) del.run(r.id);
      return rows.map(fromRow);
    }).immediate();
  }
}
