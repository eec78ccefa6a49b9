/**
 * An OCI distribution client (distribution spec v1.1) over built-in fetch: the `WWW-Authenticate` dance
 * (Bearer tokens per scope, or Basic), manifests by tag or digest, blobs streamed to disk and checked
 * against their digest before they count as present, and chunked uploads for push.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { readdir, rename, rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { ArtifactError, ExitCode, NotFoundError, SmolError, mapFsError } from '../errors/index.js';
import { findCredentials, parseWwwAuthenticate, type Challenge, type Credentials } from './auth.js';
import { httpGet, readSome } from './http-get.js';
import { registryBaseUrl } from './reference.js';

const MAX_MANIFEST = 4 << 20;
const CHUNK = 32 << 20;

export interface ClientOptions { plainHttp?: boolean; env?: NodeJS.ProcessEnv; credentials?: Credentials | null }

export interface FetchedManifest { bytes: Buffer; mediaType: string; digest: string }

export const sha256Of = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** A registry that wants credentials it does not have (or refuses the ones given): exit 69. */
export class RegistryAuthError extends SmolError {
  constructor(message: string, registry: string) {
    super(message, ExitCode.prerequisite, { where: registry, hint: `Log in with \`smol registry login ${registry}\` (or \`docker login\`), then retry.` });
  }
}

export class RegistryClient {
  readonly base: string;
  private readonly tokens = new Map<string, string>();
  private useBasic = false;

  private constructor(readonly registry: string, apiHost: string, private readonly creds: Credentials | null, opts: ClientOptions) {
    this.base = registryBaseUrl(apiHost, opts);
  }

  /** A client for `registry` (as named in references), with stored credentials unless given. */
  static async open(registry: string, apiHost: string, opts: ClientOptions = {}): Promise<RegistryClient> {
    const creds = opts.credentials !== undefined ? opts.credentials : await findCredentials(registry, opts.env);
    return new RegistryClient(registry, apiHost, creds, opts);
  }

  private authorization(scope: string): string | undefined {
    const t = this.tokens.get(scope);
    if (t) return `Bearer ${t}`;
    if (this.useBasic && this.creds) return `Basic ${Buffer.from(`${this.creds.username}:${this.creds.password}`).toString('base64')}`;
    return undefined;
  }

  /** One request with the auth dance: on a 401 the challenge is answered once and the request repeated. */
  async request(url: string, init: RequestInit, o: { scope: string; what: string; ok: number[] }): Promise<Response> {
    const abs = new URL(url, this.base).toString();
    for (let attempt = 0; ; attempt++) {
      const headers = new Headers(init.headers);
      const auth = this.authorization(o.scope);
      if (auth) headers.set('authorization', auth);
      let res: Response;
      try {
        res = await fetch(abs, { ...init, headers });
      } catch (err) {
        throw new SmolError(`${o.what} failed: cannot reach ${new URL(abs).host}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`, ExitCode.tempFail, { cause: err, hint: 'Check the registry address and your network; `--offline` uses only the local cache.' });
      }
      if (o.ok.includes(res.status)) return res;
      const body = (await res.text().catch(() => '')).slice(0, 300).trim();
      if (res.status === 401 && attempt === 0) {
        await this.answer(parseWwwAuthenticate(res.headers.get('www-authenticate') ?? ''), o);
        continue;
      }
      throw this.statusError(res.status, body, o.what);
    }
  }

  private statusError(status: number, body: string, what: string): SmolError {
    if (status === 401 || status === 403) {
      return new RegistryAuthError(`${what} failed: ${this.registry} refused access (${status})${this.creds ? ` to user ${this.creds.username}` : ' without credentials'}${body ? `: ${body}` : ''}`, this.registry);
    }
    if (status === 404) return new NotFoundError(`${what} failed: not found on ${this.registry} (404)${body ? `: ${body}` : ''}`, { where: this.registry });
    const code = status === 429 || status >= 500 ? ExitCode.tempFail : ExitCode.failure;
    return new SmolError(`${what} failed: HTTP ${status} from ${this.registry}${body ? `: ${body}` : ''}`, code);
  }

  /** GET of a blob as a Node stream, with the same auth dance as request(). */
  private async blobStream(repo: string, digest: string, what: string): Promise<IncomingMessage> {
    const scope = `repository:${repo}:pull`;
    const url = new URL(`/v2/${repo}/blobs/${digest}`, this.base);
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = {};
      const auth = this.authorization(scope);
      if (auth) headers.authorization = auth;
      let res: IncomingMessage;
      try {
        res = await httpGet(url, headers);
      } catch (err) {
        throw new SmolError(`${what} failed: cannot reach ${url.host}: ${(err as Error).message}`, ExitCode.tempFail, { cause: err });
      }
      if (res.statusCode === 200) return res;
      const body = await readSome(res).catch(() => '');
      if (res.statusCode === 401 && attempt === 0) {
        await this.answer(parseWwwAuthenticate(String(res.headers['www-authenticate'] ?? '')), { scope, what });
        continue;
      }
      throw this.statusError(res.statusCode ?? 0, body, what);
    }
  }

  private async answer(challenges: Challenge[], o: { scope: string; what: string }): Promise<void> {
    const bearer = challenges.find((c) => c.scheme === 'bearer');
    if (bearer?.params.realm) {
      this.tokens.set(o.scope, await this.fetchToken(bearer, o));
      return;
    }
    if (challenges.some((c) => c.scheme === 'basic') && this.creds) { this.useBasic = true; return; }
    throw new RegistryAuthError(`${o.what} failed: ${this.registry} requires authentication${challenges.length ? ` (${challenges.map((c) => c.scheme).join(', ')})` : ''} and no credentials are stored for it`, this.registry);
  }

  /** The token endpoint of the Docker token spec: GET realm?service=…&scope=…, Basic credentials when we have them. */
  private async fetchToken(ch: Challenge, o: { scope: string; what: string }): Promise<string> {
    const url = new URL(ch.params.realm);
    if (ch.params.service) url.searchParams.set('service', ch.params.service);
    const scope = o.scope || ch.params.scope;
    if (scope) url.searchParams.set('scope', scope);
    const headers: Record<string, string> = {};
    if (this.creds) headers.authorization = `Basic ${Buffer.from(`${this.creds.username}:${this.creds.password}`).toString('base64')}`;
    let res: Response;
    try {
      res = await fetch(url, { headers });
    } catch (err) {
      throw new SmolError(`${o.what} failed: cannot reach the token service ${url.host}: ${(err as Error).message}`, ExitCode.tempFail, { cause: err });
    }
    if (res.status === 401 || res.status === 403) throw new RegistryAuthError(`${o.what} failed: the token service of ${this.registry} refused ${this.creds ? `user ${this.creds.username}` : 'anonymous access'} (${res.status})`, this.registry);
    if (!res.ok) throw new SmolError(`${o.what} failed: token service ${url.host} answered HTTP ${res.status}`, res.status >= 500 ? ExitCode.tempFail : ExitCode.failure);
    const body = (await res.json().catch(() => ({}))) as { token?: string; access_token?: string };
    const token = body.token ?? body.access_token;
    if (!token) throw new SmolError(`${o.what} failed: token service ${url.host} sent no token`);
    return token;
  }

  async getManifest(repo: string, reference: string, accept: string[], what: string): Promise<FetchedManifest> {
    const res = await this.request(`/v2/${repo}/manifests/${reference}`, { headers: { accept: accept.join(', ') } }, { scope: `repository:${repo}:pull`, what, ok: [200] });
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > MAX_MANIFEST) throw new ArtifactError(`${what} failed: manifest of ${declared} bytes is over the ${MAX_MANIFEST}-byte limit`);
    const bytes = Buffer.from(await res.arrayBuffer());
    if (bytes.length > MAX_MANIFEST) throw new ArtifactError(`${what} failed: manifest of ${bytes.length} bytes is over the ${MAX_MANIFEST}-byte limit`);
    const mediaType = (res.headers.get('content-type') ?? '').split(';')[0].trim();
    return { bytes, mediaType, digest: sha256Of(bytes) };
  }

  async putManifest(repo: string, reference: string, bytes: Buffer, mediaType: string, what: string): Promise<string> {
    const res = await this.request(`/v2/${repo}/manifests/${reference}`, { method: 'PUT', body: bytes, headers: { 'content-type': mediaType } }, { scope: `repository:${repo}:pull,push`, what, ok: [201] });
    return res.headers.get('docker-content-digest') ?? sha256Of(bytes);
  }

  async hasBlob(repo: string, digest: string, scope = `repository:${repo}:pull`): Promise<boolean> {
    const res = await this.request(`/v2/${repo}/blobs/${digest}`, { method: 'HEAD' }, { scope, what: `checking blob ${digest}`, ok: [200, 404] });
    return res.status === 200;
  }

  /** Uploads a blob unless the registry has it (returns false then): POST, PATCH chunks, PUT with the digest. */
  async uploadBlob(repo: string, digest: string, size: number, read: (off: number, len: number) => Promise<Buffer>): Promise<boolean> {
    const scope = `repository:${repo}:pull,push`;
    if (await this.hasBlob(repo, digest, scope)) return false;
    const what = `push ${this.registry}/${repo}`;
    const start = await this.request(`/v2/${repo}/blobs/uploads/`, { method: 'POST' }, { scope, what: `${what}: start upload`, ok: [202] });
    let loc = location(this.base, start, what);
    for (let off = 0; off < size; off += CHUNK) {
      const body = await read(off, Math.min(CHUNK, size - off));
      const res = await this.request(loc.toString(), {
        method: 'PATCH', body,
        headers: { 'content-type': 'application/octet-stream', 'content-range': `${off}-${off + body.length - 1}`, 'content-length': String(body.length) },
      }, { scope, what: `${what}: upload bytes ${off}+${body.length}`, ok: [202] });
      loc = location(loc.toString(), res, what);
    }
    loc.searchParams.set('digest', digest);
    await this.request(loc.toString(), { method: 'PUT', headers: { 'content-length': '0' } }, { scope, what: `${what}: finish upload`, ok: [201] });
    return true;
  }

  /**
   * Streams a blob into `target`, hashing as it goes. The bytes land in a temp file beside the target that
   * is renamed only once digest and size match, so a kill at any point leaves no file at `target`; a
   * mismatch deletes the temp file and fails with exit 76.
   */
  async downloadBlob(repo: string, digest: string, size: number | undefined, target: string, o: { what: string; onBytes?: (n: number) => void }): Promise<number> {
    const res = await this.blobStream(repo, digest, o.what);
    const tmp = tempName(target);
    const h = createHash('sha256');
    let got = 0;
    try {
      const ws = createWriteStream(tmp, { flags: 'wx', mode: 0o644, highWaterMark: 4 << 20 });
      const closed = new Promise<void>((resolve, reject) => { ws.once('close', resolve); ws.once('error', reject); });
      try {
        for await (const chunk of res as AsyncIterable<Buffer>) {
          got += chunk.length;
          if (size !== undefined && got > size) throw new ArtifactError(`${o.what} failed: blob ${digest} is larger than the ${size} bytes its manifest declares; it was deleted`, { where: digest });
          h.update(chunk);
          if (!ws.write(chunk)) await Promise.race([once(ws, 'drain'), closed]);
          o.onBytes?.(chunk.length);
        }
      } catch (err) {
        res.destroy();
        ws.destroy();
        await closed.catch(() => undefined);
        throw err;
      }
      ws.end();
      await closed;
      const actual = `sha256:${h.digest('hex')}`;
      if (actual !== digest || (size !== undefined && got !== size)) {
        throw new ArtifactError(`${o.what} failed: blob ${digest} arrived as ${actual} (${got} bytes${size !== undefined ? `, ${size} declared` : ''}); it was deleted`, { where: digest, hint: 'The registry served corrupt or substituted content; nothing was cached.' });
      }
      await rename(tmp, target);
      return got;
    } catch (err) {
      await rm(tmp, { force: true });
      throw mapFsError(err, o.what);
    }
  }
}

function location(base: string, res: Response, what: string): URL {
  const loc = res.headers.get('location');
  if (!loc) throw new SmolError(`${what} failed: the registry sent no upload Location`);
  return new URL(loc, base);
}

/** `.tmp-<pid>-<random>-<name>` beside the target: sweepDeadTemps can tell whose it was. */
export function tempName(target: string): string {
  return path.join(path.dirname(target), `.tmp-${process.pid}-${randomBytes(4).toString('hex')}-${path.basename(target)}`);
}

/** Deletes temp files left by processes that no longer exist (a pull killed with -9). */
export async function sweepDeadTemps(dir: string): Promise<number> {
  let n = 0;
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const m = /^\.tmp-(\d+)-/.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    let alive = true;
    try { process.kill(pid, 0); } catch (e) { alive = (e as NodeJS.ErrnoException).code === 'EPERM'; }
    if (alive) continue;
    await rm(path.join(dir, name), { force: true });
    n++;
  }
  return n;
}
