/**
 * Registry credentials and challenges. Credentials come from smol's own store (`smol registry login`,
 * $SMOL_HOME/registry-auth.json, mode 0600) first, then Docker's config ($DOCKER_CONFIG/config.json or
 * ~/.docker/config.json: credential helpers, or `auths` entries with a base64 `user:password` in `auth`).
 * Both files share Docker's shape, so either tool can read what the other wrote.
 */
import { chmod, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { ValidationError, mapFsError } from '../errors/index.js';
import { smolHome } from '../util/paths.js';
import { DOCKER_HUB } from './reference.js';

export interface Challenge { scheme: string; params: Record<string, string> }

/**
 * `WWW-Authenticate` (RFC 7235): one or more `Scheme k=v, k="quoted, with \" escapes"` challenges.
 * Parameter names are lower-cased; values keep their case.
 */
export function parseWwwAuthenticate(header: string): Challenge[] {
  const out: Challenge[] = [];
  let i = 0;
  const s = header;
  const skip = () => { while (i < s.length && /[\s,]/.test(s[i])) i++; };
  const token = () => { const m = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+/.exec(s.slice(i)); if (!m) return ''; i += m[0].length; return m[0]; };
  while (i < s.length) {
    skip();
    const scheme = token();
    if (!scheme) break;
    const ch: Challenge = { scheme: scheme.toLowerCase(), params: {} };
    out.push(ch);
    const t68 = /^\s+[A-Za-z0-9._~+/-]+=*\s*(?=,|$)/.exec(s.slice(i)); // `Basic abc==`: a token68, not parameters
    if (t68) { i += t68[0].length; continue; }
    for (;;) {
      while (i < s.length && /[\s]/.test(s[i])) i++;
      const save = i;
      if (s[i] === ',') { i++; while (i < s.length && /\s/.test(s[i])) i++; }
      const name = token();
      while (i < s.length && /\s/.test(s[i])) i++;
      if (!name || s[i] !== '=') { i = save; break; } // the next challenge's scheme (or a token68): not a param
      i++;
      while (i < s.length && /\s/.test(s[i])) i++;
      let value = '';
      if (s[i] === '"') {
        i++;
        while (i < s.length && s[i] !== '"') { if (s[i] === '\\' && i + 1 < s.length) i++; value += s[i++]; }
        i++;
      } else {
        value = token();
      }
      ch.params[name.toLowerCase()] = value;
    }
    if (Object.keys(ch.params).length === 0) { // token68 (`Basic abc=`) or a bare scheme: skip to the next comma
      while (i < s.length && s[i] !== ',') i++;
    }
  }
  return out;
}

export interface Credentials { username: string; password: string }

const authEntrySchema = z.object({ auth: z.string().optional(), username: z.string().optional(), password: z.string().optional(), identitytoken: z.string().optional() }).loose();
const authFileSchema = z.object({ auths: z.record(z.string(), authEntrySchema).optional(), credsStore: z.string().optional(), credHelpers: z.record(z.string(), z.string()).optional() }).loose();
type AuthFile = z.infer<typeof authFileSchema>;

export const smolAuthFile = (env: NodeJS.ProcessEnv = process.env) => path.join(smolHome(env), 'registry-auth.json');
export const dockerConfigFile = (env: NodeJS.ProcessEnv = process.env) => path.join(env.DOCKER_CONFIG ? path.resolve(env.DOCKER_CONFIG) : path.join(os.homedir(), '.docker'), 'config.json');

async function readAuthFile(file: string): Promise<AuthFile> {
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) return {};
  let json: unknown;
  try { json = JSON.parse(text); } catch { throw new ValidationError(`${file} is not JSON`, [{ path: file, message: 'invalid JSON' }], { hint: 'Fix or remove the file, then log in again.' }); }
  const r = authFileSchema.safeParse(json);
  if (!r.success) throw new ValidationError(`${file}: unreadable credentials`, r.error.issues.map((i) => ({ path: `${file}:${i.path.join('.')}`, message: i.message })));
  return r.data;
}

/** The keys a registry may be stored under: Docker writes Hub as `https://index.docker.io/v1/`. */
function keysFor(registry: string): string[] {
  const hosts = registry === DOCKER_HUB ? ['docker.io', 'index.docker.io', 'registry-1.docker.io'] : [registry];
  const keys: string[] = [];
  for (const h of hosts) keys.push(h, `https://${h}`, `http://${h}`, `https://${h}/v1/`, `https://${h}/v2/`);
  if (registry === DOCKER_HUB) keys.unshift('https://index.docker.io/v1/');
  return keys;
}

function decode(entry: z.infer<typeof authEntrySchema>, where: string): Credentials | null {
  if (entry.auth) {
    const plain = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = plain.indexOf(':');
    if (colon < 0) throw new ValidationError(`${where}: \`auth\` is not base64 of user:password`, [{ path: where, message: 'no colon in the decoded auth' }]);
    return { username: plain.slice(0, colon), password: plain.slice(colon + 1) };
  }
  if (entry.username !== undefined && entry.password !== undefined) return { username: entry.username, password: entry.password };
  return null;
}

/**
 * smol's own logins first; then Docker's config as Docker reads it: a `credHelpers` entry for the
 * registry, else `credsStore`, runs that helper (its "not found" is anonymous access, not a fallback to
 * `auths`); with neither, the `auths` entry.
 */
export async function findCredentials(registry: string, env: NodeJS.ProcessEnv = process.env): Promise<(Credentials & { source: string }) | null> {
  const fromAuths = (file: string, data: AuthFile) => {
    for (const k of keysFor(registry)) {
      const entry = data.auths?.[k];
      const c = entry && decode(entry, `${file} auths.${k}`);
      if (c) return { ...c, source: file };
    }
    return null;
  };
  const own = smolAuthFile(env);
  const mine = fromAuths(own, await readAuthFile(own));
  if (mine) return mine;
  const file = dockerConfigFile(env);
  const docker = await readAuthFile(file);
  const helper = keysFor(registry).map((k) => docker.credHelpers?.[k]).find(Boolean) ?? docker.credsStore;
  if (helper) {
    const { helperGet } = await import('./cred-helper.js');
    return helperGet(helper, registry === DOCKER_HUB ? 'https://index.docker.io/v1/' : registry, file, env);
  }
  return fromAuths(file, docker);
}

/** Writes the store beside itself and renames, created 0600 so the secret is never readable by others. */
async function writeAuthFile(file: string, data: AuthFile): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}`;
  try {
    const fh = await open(tmp, 'w', 0o600);
    try { await fh.writeFile(JSON.stringify(data, null, 2) + '\n'); await fh.sync(); } finally { await fh.close(); }
    await chmod(tmp, 0o600);
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw mapFsError(e, `writing ${file}`);
  }
}

export async function storeCredentials(registry: string, c: Credentials, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const file = smolAuthFile(env);
  const data = await readAuthFile(file);
  const auths = { ...(data.auths ?? {}) };
  for (const k of keysFor(registry)) delete auths[k];
  auths[registry] = { auth: Buffer.from(`${c.username}:${c.password}`).toString('base64') };
  await writeAuthFile(file, { ...data, auths });
  return file;
}

/** Removes smol's stored login for the registry; Docker's own file is left alone. True when one was removed. */
export async function removeCredentials(registry: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const file = smolAuthFile(env);
  const data = await readAuthFile(file);
  const auths = { ...(data.auths ?? {}) };
  let removed = false;
  for (const k of keysFor(registry)) if (k in auths) { delete auths[k]; removed = true; }
  if (removed) await writeAuthFile(file, { ...data, auths });
  return removed;
}

/** `host[:port]` from what people type after `login`: `https://ghcr.io/`, `localhost:5000`, `docker.io`. */
export function normalizeRegistry(input: string | undefined): string {
  if (!input) return DOCKER_HUB;
  const host = input.replace(/^[a-z]+:\/\//i, '').replace(/\/.*$/, '').toLowerCase();
  return ['index.docker.io', 'registry-1.docker.io', 'registry.hub.docker.com'].includes(host) ? DOCKER_HUB : host;
}
