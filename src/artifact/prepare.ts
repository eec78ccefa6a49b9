/**
 * What `smol machine create --from FILE` and `smol pack run FILE` call: extract once (cached, verified),
 * then decide resume vs cold boot for this host. The caller boots or restores from the returned files.
 */
import { canResume, type HostQemu } from './manifest.js';
import { defaultArtifactCache, ensureExtracted, type EnsureOptions, type EnsureResult } from './cache.js';

export interface PrepareOptions extends EnsureOptions {
  /** Defaults to $SMOL_HOME/cache/artifacts. */
  cacheDir?: string;
  /** This host's QEMU identity; without it a memory-carrying artifact cold-boots. */
  host?: HostQemu;
}

export interface PreparedArtifact extends EnsureResult {
  /** true: restore memory.ram + device-state; false: cold-boot the disk (see notice). */
  resume: boolean;
  /** One line for the user when saved memory state is present but cannot be used here. */
  notice?: string;
}

export async function prepareFromArtifact(file: string, opts: PrepareOptions = {}): Promise<PreparedArtifact> {
  const r = await ensureExtracted(file, opts.cacheDir ?? defaultArtifactCache(), opts);
  if (!r.manifest.resume) return { ...r, resume: false };
  const decision = opts.host ? canResume(r.manifest, opts.host) : { ok: false as const, reason: 'this host\'s QEMU identity is unknown' };
  if (decision.ok) return { ...r, resume: true };
  return { ...r, resume: false, notice: `cold-booting ${file}: its saved memory state cannot be restored here (${decision.reason})` };
}
