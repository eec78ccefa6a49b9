/**
 * Stage environments that travel by digest (`isolation: {vm: {artifact: REGISTRY/NAME@sha256:…}}`): a fresh
 * worker host needs only smol and the registry. The first attempt on a host pulls the `.smolmachine` (the
 * registry's manifest must have the pinned digest and the blob the digest the manifest names; the entries are
 * checked by SHA-256 and the disk's qcow2 header when the machine is made from it), boots it once (resuming its
 * packed memory where it was packed `--with-memory`), saves a fork point `art-<digest12>` from it and removes
 * the machine. Every attempt after that, by any worker on the host, clones the point: nothing is pulled or
 * booted again. Workers starting together take one host-wide lock per digest, so one pulls and saves while
 * the others wait and find its point; a worker killed half-way leaves the lock to the next (store.lock takes
 * over a dead holder's) and its machine to be removed by it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConflictError, TimeoutError } from '../errors/index.js';
import { mergeSpec } from '../smolfile/merge.js';
import { dataPaths } from '../util/paths.js';
import { saveForkPoint } from '../vm/api/fork.js';
import { ForkPointStore, pulledArtifactLock, removePoint, type MachineService } from '../vm/api/machines.js';

/**
 * How long a worker waits for another worker on its host to pull and save the point. Long, since the other is
 * pulling a whole disk image, and safe, since a dead holder's lock is taken over at once.
 */
export const ARTIFACT_POINT_WAIT_MS = 20 * 60_000;

/** The fork point of a digest-pinned artifact (`sha256:…` or a reference ending in one): `art-` and 12 hex digits. */
export function artifactPointName(refOrDigest: string): string {
  return `art-${digestOf(refOrDigest).slice('sha256:'.length, 'sha256:'.length + 12)}`;
}

function digestOf(refOrDigest: string): string {
  const d = refOrDigest.slice(refOrDigest.lastIndexOf('@') + 1);
  if (!/^sha256:[0-9a-f]{64}$/.test(d)) throw new ConflictError(`artifact reference "${refOrDigest}" is not pinned by a sha256 digest`, { where: refOrDigest });
  return d;
}

/** Where a host keeps a pulled artifact: named by the full digest it was pulled by (a point's spec names this file). */
export function pulledArtifactFile(home: string, refOrDigest: string): string {
  return path.join(dataPaths(home).pulledArtifacts, `${digestOf(refOrDigest).slice('sha256:'.length)}.smolmachine`);
}

export interface ArtifactPointResult {
  point: string;
  /** What this call did: nothing (the point was there), or pulled and/or saved it. */
  pulled: boolean;
  saved: boolean;
  /** Set when the artifact carries memory that could not be resumed here, or carries none: why it was booted. */
  booted?: string;
}

/** The point to clone for `ref`, pulled and saved now if no worker on this host has. */
export async function ensureArtifactPoint(svc: MachineService, ref: string, o: { onNotice?: (line: string) => void; waitMs?: number } = {}): Promise<ArtifactPointResult> {
  const point = artifactPointName(ref);
  const file = pulledArtifactFile(svc.home, ref);
  const deadline = Date.now() + (o.waitMs ?? ARTIFACT_POINT_WAIT_MS);
  for (;;) {
    // a machine of the point's name is another worker preparing it, or one killed half-way: take the lock
    if (!svc.store.find(point) && usablePoint(svc, point, file, ref)) return { point, pulled: false, saved: false };
    let unlock: () => void;
    try {
      unlock = svc.store.lock(pulledArtifactLock(digestOf(ref)), 'pull', ref);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      if (Date.now() > deadline) throw new TimeoutError(`preparing ${ref} did not get its turn within ${Math.round((o.waitMs ?? ARTIFACT_POINT_WAIT_MS) / 1000)}s: ${err.message}`, { where: ref });
      await new Promise((r) => setTimeout(r, 200 + Math.random() * 300));
      continue;
    }
    try {
      // holding the lock, a machine of the point's name is a killed worker's (its QEMU may still run)
      if (svc.store.find(point)) await svc.remove(point, { force: true, cascade: true });
      // the holder we waited for may have saved it
      if (usablePoint(svc, point, file, ref)) return { point, pulled: false, saved: false };
      return await prepare(svc, ref, point, file, o.onNotice);
    } finally {
      unlock();
    }
  }
}

/**
 * Whether the point exists and can be cloned. One saved from another artifact under the same 12 digits is
 * refused; one whose memory template is gone (a host reboot empties /dev/shm) is dropped, to be saved again.
 */
function usablePoint(svc: MachineService, point: string, file: string, ref: string): boolean {
  const fp = new ForkPointStore(svc.store.db).byName(point);
  if (!fp) return false;
  if (fp.source?.spec.image !== file) {
    throw new ConflictError(`fork point "${point}" was not saved from artifact ${ref}`, { where: point, hint: `Remove it (smol snapshot rm --force ${point}) and start the worker again.` });
  }
  if (fs.existsSync(fp.memFile)) return true;
  removePoint(svc, point, { force: true });
  return false;
}

async function prepare(svc: MachineService, ref: string, point: string, file: string, onNotice?: (line: string) => void): Promise<ArtifactPointResult> {
  const { inspectArtifact, pullArtifact } = await import('../artifact/index.js'); // only a host that runs artifacts loads it
  let pulled = false;
  if (!fs.existsSync(file)) {
    // committed only once the manifest digest, the blob digest and the artifact's own framing have checked out
    const r = await pullArtifact(ref, file, { force: true });
    pulled = true;
    onNotice?.(`pulled ${ref} (${(r.size / 2 ** 20).toFixed(1)} MiB, blob ${r.blobDigest})`);
  }
  const { manifest } = await inspectArtifact(file);
  const spec = mergeSpec(undefined, undefined, {
    image: file, cpus: manifest.resources.cpus, memory: manifest.resources.memoryMiB, env: manifest.env, workdir: manifest.workdir, command: manifest.entrypoint,
  });
  let booted = manifest.resume ? undefined : 'the artifact carries no memory';
  const rec = await svc.create(spec, { name: point });
  try {
    // the start resumes a memory-carrying artifact, or says why it boots the disk instead (vm/resume.ts)
    await svc.start(rec.id, { forkable: true, onProgress: (m) => { if (/booting/.test(m)) booted ??= m; } });
    await saveForkPoint(svc, rec.id, point);
  } finally {
    // the point keeps its own disk layer, template and state: the machine is not needed any more
    await svc.remove(rec.id, { force: true }).catch(() => undefined);
  }
  onNotice?.(`saved fork point ${point} from ${ref} (${booted ? `booted: ${booted}` : 'resumed its packed memory'})`);
  return { point, pulled, saved: true, ...(booted ? { booted } : {}) };
}
