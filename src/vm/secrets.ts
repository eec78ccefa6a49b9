/**
 * Delivering secrets (docs/secrets.md). A secret's value is read from the host (an environment variable or a
 * file) at the moment a guest command needs it, and goes only over the agent channel: into that command's
 * environment, or into a file under /run/secrets (the guest's /run is a tmpfs, so never onto its disk).
 * Nothing here writes a value anywhere on the host. What smol cannot scrub is guest RAM: a machine that
 * received a secret since it started is refused for a fork or a memory pack until it restarts.
 */
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { ConflictError, NotFoundError, UserError } from '../errors/index.js';
import { SECRETS_DIR, hasSecrets, type SecretDecl } from '../smolfile/secrets.js';
import type { GuestChannel } from './engine.js';
import { holdsSecrets, type MachineRecord, type MachineStore } from './store/machines.js';

export interface ResolvedSecrets { env: Record<string, string>; files: { name: string; data: Buffer }[] }

export const noResolved = (): ResolvedSecrets => ({ env: {}, files: [] });

/** Reads every declared value now; a missing variable or unreadable file fails before anything starts. */
export function resolveSecrets(decl: SecretDecl | undefined, hostEnv: NodeJS.ProcessEnv = process.env): ResolvedSecrets {
  if (!decl || !hasSecrets(decl)) return noResolved();
  const env: Record<string, string> = {};
  for (const n of decl.env) {
    const v = hostEnv[n];
    if (v === undefined) {
      throw new NotFoundError(`secret env ${n} is not set in the host environment`, { where: `--secret-env ${n}`, hint: `Export it before running smol (export ${n}=…), or drop the secret.` });
    }
    env[n] = v;
  }
  const files = Object.entries(decl.files).map(([name, p]) => {
    let st: fs.Stats;
    try {
      st = fs.statSync(p);
    } catch {
      throw new NotFoundError(`secret file ${name}: ${p} does not exist`, { where: `--secret-file ${name}=${p}`, hint: 'Point it at an existing, readable file.' });
    }
    if (!st.isFile()) throw new UserError(`secret file ${name}: ${p} is not a regular file`, { where: `--secret-file ${name}=${p}` }, 65);
    try {
      return { name, data: fs.readFileSync(p) };
    } catch (err) {
      throw new NotFoundError(`secret file ${name}: ${p} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { where: `--secret-file ${name}=${p}`, hint: 'Make it readable by the user running smol.' });
    }
  });
  return { env, files };
}

export const anySecrets = (r: ResolvedSecrets): boolean => r.files.length > 0 || Object.keys(r.env).length > 0;

/**
 * Writes the secret files (mode 0400, root) and records that the machine's RAM may now hold a secret: only the
 * time, never a name or value. Env secrets travel inside the exec request the caller sends next.
 */
export async function deliverSecrets(ch: GuestChannel, r: ResolvedSecrets, store: MachineStore, rec: Pick<MachineRecord, 'id'>): Promise<void> {
  if (!anySecrets(r)) return;
  store.update(rec.id, { secretsAt: Date.now() });
  for (const f of r.files) await ch.putFile(Readable.from([f.data]), `${SECRETS_DIR}/${f.name}`, 0o400); // the engine makes /run/secrets (0755) on the guest's /run tmpfs
}

/** Fork points and memory packs copy guest RAM, where a delivered secret may linger (freed pages, buffers). */
export function refuseSecretRam(rec: MachineRecord, what: 'fork' | 'pack create --with-memory'): void {
  if (rec.state === 'running' && holdsSecrets(rec)) {
    throw new ConflictError(`${what} of "${rec.name}" refused: it received a secret since it started, and its memory may still hold it`, {
      where: rec.name, hint: `Restart it (smol machine stop ${rec.name} && smol machine start ${rec.name} --forkable) and ${what === 'fork' ? 'fork' : 'pack'} before passing secrets; clones can receive their own.`,
    });
  }
}
