/**
 * Volumes as the user writes them (`-v HOST:GUEST[:ro]`, the Smolfile's `volumes:`) and the checks that
 * run before anything is made: a bad volume fails the command with the flag named and leaves nothing behind.
 */
import fs from 'node:fs';
import path from 'node:path';
import { NotFoundError, ValidationError, type Issue } from '../../errors/index.js';
import { guestPathProblem, normalizeGuestPath, type Volume } from '../../smolfile/schema.js';
import { assetsHome, smolHome } from '../../util/paths.js';
import { hostPathProblem, type SmolDirs } from './host-policy.js';

/**
 * A volume as a machine's spec holds it. `unsafe`: the user passed --allow-unsafe-volume with it, so the
 * host-path policy (host-policy.ts) does not apply. Only a flag or an API caller sets it: a Smolfile's
 * schema has no such key, so a Smolfile someone else wrote cannot grant it to itself.
 */
export type HostVolume = Volume & { unsafe?: boolean };

export const UNSAFE_VOLUME_FLAG = '--allow-unsafe-volume';
const unsafeHint = `Share a directory of your own that holds none of these instead. If you really mean it, add ${UNSAFE_VOLUME_FLAG} `
  + '(docs/volumes.md#host-paths-smol-refuses).';

/** smol's own directories for this process (an engine passes its own home). */
export const smolDirs = (): SmolDirs => ({ home: smolHome(), assets: assetsHome() });

/**
 * `HOST:GUEST`, `HOST:GUEST:ro` or `HOST:GUEST:rw` (Docker's form). The guest path holds no colon, so a host
 * path may. A relative host path is relative to cwd.
 */
export function parseVolumeFlag(v: string, cwd = process.cwd()): Volume {
  let rest = v;
  let readonly = false;
  const mode = /:(ro|rw)$/.exec(rest);
  if (mode) {
    readonly = mode[1] === 'ro';
    rest = rest.slice(0, -3);
  }
  const at = rest.lastIndexOf(':');
  if (at <= 0 || at === rest.length - 1) {
    throw new ValidationError('invalid volume', [{ path: '-v', message: `"${v}" is not HOST:GUEST[:ro] (e.g. -v ./src:/work or -v /data:/data:ro)` }]);
  }
  const host = rest.slice(0, at);
  const guest = rest.slice(at + 1);
  const why = guestPathProblem(guest);
  if (why) throw new ValidationError('invalid volume', [{ path: '-v', message: `${why} (in -v ${v})` }]);
  return { host: path.resolve(cwd, host), guest: normalizeGuestPath(guest), readonly };
}

/** How to name volume i in an error: the flag for -v entries, the Smolfile field otherwise. */
export type VolumeLabel = (i: number) => string;
export const flagLabel = (vs: readonly Volume[]): VolumeLabel => (i) => `-v ${vs[i].host}:${vs[i].guest}${vs[i].readonly ? ':ro' : ''}`;

/**
 * Everything a volume list must satisfy before a machine is made or started: guest paths valid and distinct,
 * host paths existing directories that smol may share. Missing host paths are NotFoundError (66); the rest,
 * refused host paths included, ValidationError (65).
 */
export function checkVolumes(vs: readonly HostVolume[], label: VolumeLabel = flagLabel(vs), dirs: SmolDirs = smolDirs()): void {
  const issues: Issue[] = [];
  const seen = new Map<string, number>();
  vs.forEach((v, i) => {
    const why = guestPathProblem(v.guest);
    if (why) issues.push({ path: label(i), message: why });
    const g = normalizeGuestPath(v.guest);
    const j = seen.get(g);
    if (j !== undefined) issues.push({ path: label(i), message: `guest path ${g} is already used by ${label(j)}` });
    else seen.set(g, i);
    if (!path.isAbsolute(v.host)) issues.push({ path: label(i), message: `host path "${v.host}" must be absolute here` });
  });
  if (issues.length) throw new ValidationError('invalid volume', issues, { hint: 'Each volume needs an absolute guest path of its own, other than /.' });
  vs.forEach((v, i) => {
    let st: fs.Stats;
    try {
      st = fs.statSync(v.host);
    } catch {
      throw new NotFoundError(`volume host path not found: ${v.host}`, { where: label(i), hint: 'Create the directory first, or fix the path (relative paths in a Smolfile are relative to the Smolfile).' });
    }
    if (!st.isDirectory()) {
      throw new ValidationError('invalid volume', [{ path: label(i), message: `host path ${v.host} is not a directory (a volume shares a directory; mount its parent instead)` }]);
    }
  });
  const refused = vs.flatMap((v, i) => {
    const why = hostVolumeProblem(v, dirs);
    return why ? [{ path: label(i), message: why }] : [];
  });
  if (refused.length) throw new ValidationError('refused volume: smol does not share this host path', refused, { hint: unsafeHint });
}

/** Why this (existing) volume's host directory must not be shared, or null; its real path is what counts. */
export function hostVolumeProblem(v: HostVolume, dirs: SmolDirs): string | null {
  if (v.unsafe) return null;
  const real = fs.realpathSync(v.host);
  const why = hostPathProblem(real, v.readonly, dirs);
  return why && `host path ${v.host}${real === v.host ? '' : ` (really ${real})`} is refused: ${why}`;
}

/** The same refusal for a volume found unsafe only as virtiofsd starts (a symlink changed since the check). */
export const refusedVolume = (v: HostVolume, why: string) =>
  new ValidationError('refused volume: smol does not share this host path', [{ path: flagLabel([v])(0), message: why }], { hint: unsafeHint });

/** The machine's volumes, for records made before volumes existed. */
export const volumesOf = (spec: { volumes?: Volume[] }): HostVolume[] => spec.volumes ?? [];
