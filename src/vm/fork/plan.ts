/** Pure parts of a fork: clone names and each clone's environment. */
import { ConflictError, UserError } from '../../errors/index.js';
import { validateName } from '../store/machines.js';

export const MAX_CLONES = 64;

export interface CloneIdentity { index: number; name: string; env: Record<string, string> }

/**
 * Clone names: PREFIX1…PREFIXn. With the default prefix ("PARENT-") numbering continues after the highest
 * existing clone name, so forking twice just works; an explicit prefix that collides is refused.
 */
export function cloneNames(parent: string, count: number, existing: ReadonlySet<string>, prefix?: string): string[] {
  if (!Number.isInteger(count) || count < 1 || count > MAX_CLONES) {
    throw new UserError(`--count must be an integer from 1 to ${MAX_CLONES}, got ${count}`);
  }
  const p = prefix ?? `${parent}-`;
  let start = 1;
  if (prefix === undefined) {
    for (const n of existing) {
      const m = n.startsWith(p) ? /^\d+$/.exec(n.slice(p.length)) : null;
      if (m) start = Math.max(start, Number(m[0]) + 1);
    }
  }
  const names = Array.from({ length: count }, (_, i) => `${p}${start + i}`);
  for (const n of names) validateName(n);
  const taken = names.filter((n) => existing.has(n));
  if (taken.length) {
    throw new ConflictError(`clone name${taken.length > 1 ? 's' : ''} already taken: ${taken.join(', ')}`, { hint: 'Pick another --name-prefix, or remove those machines first.' });
  }
  return names;
}

/** Parses -e K=V flags; `{index}`, `{name}` and `{count}` in a value expand per clone. */
export function parseEnvFlags(flags: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of flags) {
    const eq = f.indexOf('=');
    if (eq < 1 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(f.slice(0, eq))) throw new UserError(`invalid -e "${f}": use NAME=value`);
    out[f.slice(0, eq)] = f.slice(eq + 1);
  }
  return out;
}

export function cloneEnv(o: { parent: string; forkId: string; names: readonly string[]; user: Record<string, string> }): CloneIdentity[] {
  return o.names.map((name, i) => {
    const index = i + 1;
    const vars = { index: String(index), name, count: String(o.names.length) };
    const user = Object.fromEntries(Object.entries(o.user).map(([k, v]) => [k, v.replace(/\{(index|name|count)\}/g, (_, key: keyof typeof vars) => vars[key])]));
    return {
      index, name,
      env: {
        SMOL_FORK_ROLE: 'clone', SMOL_FORK_ID: o.forkId, SMOL_PARENT: o.parent, SMOL_CLONE_NAME: name,
        SMOL_CLONE_INDEX: String(index), SMOL_CLONE_COUNT: String(o.names.length), ...user,
      },
    };
  });
}

export function parentEnv(parent: string, forkId: string, count: number): Record<string, string> {
  return { SMOL_FORK_ROLE: 'parent', SMOL_FORK_ID: forkId, SMOL_PARENT: parent, SMOL_CLONE_COUNT: String(count) };
}
