/**
 * An OCI distribution client (distribution spec v1.1) over node:http/https: the `WWW-Authenticate` dance
 * (Bearer tokens per scope, or Basic), manifests by tag or digest, blobs streamed to disk (blob-get.ts) and
 * checked against their digest before they count as present, and chunked uploads for push. TLS trust per
 * registry comes from trust.ts (Docker's certs.d, SSL_CERT_FILE, NODE_EXTRA_CA_CERTS).
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import { readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type tls from 'node:tls';
import { ArtifactError, ExitCode, NotFoundError, SmolError, mapFsError } from '../errors/index.js';
import { findCredentials, parseWwwAuthenticate, type Challenge, type Credentials } from './auth.js';
import { TransferError, getBlob } from './blob-get.js';
import { httpRequest, type SmallRequest, type SmallResponse } from './http-get.js';
import { isInsecureRegistry, registryBaseUrl } from './reference.js';
import { StallError, registryTimeouts, stallError, type Timeouts } from './timeouts.js';
import { speaksTls, tlsTrustError, trustFor } from './trust.js';

const MAX_MANIFEST = 4 << 20;
const CHUNK = 32 << 20;

export interface ClientOptions { plainHttp?: boolean; env?: NodeJS.ProcessEnv; credentials?: Credentials | null }

export interface FetchedManifest { bytes: Buffer; mediaType: string; digest: string }

export type RegistryResponse = SmallResponse;

export const sha256Of = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** A registry that wants credentials it does not have (or refuses the ones given): exit 69. */
export class RegistryAuthError extends SmolError {
  constructor(message: string, registry: string) {
    super(message, ExitCode.prerequisite, { where: registry, hint: `Log in with \`smol registry login ${registry}\` (or \`docker login\`), then retry.` });
  }
}

export class RegistryClient {
  private readonly tokens = new Map<string, string>();
  private useBasic = false;

  private constructor(readonly registry: string, readonly base: string, private readonly creds: Credentials | null, private readonly tls: tls.ConnectionOptions, private readonly env: NodeJS.ProcessEnv, private readonly timeouts: Timeouts) {}

  /** A client for `registry` (as named in references), with stored credentials unless given. */
  static async open(registry: string, apiHost: string, opts: ClientOptions = {}): Promise<RegistryClient> {
    const env = opts.env ?? process.env;
    const timeouts = registryTimeouts(env); // a bad value fails before any credential helper runs
    const creds = opts.credentials !== undefined ? opts.credentials : await findCredentials(registry, env);
    const trust = await trustFor([...new Set([registry, apiHost])], env);
    let base = registryBaseUrl(apiHost, { plainHttp: opts.plainHttp, env });
    // loopback and listed registries: HTTPS when they speak TLS (Docker tries HTTPS first too), else HTTP
    if (!opts.plainHttp && base.startsWith('http:') && await speaksTls(apiHost, trust.options)) base = `https://${apiHost}`;
    return new RegistryClient(registry, base, creds, trust.options, env, timeouts);
  }

  private authorization(scope: string): string | undefined {
    const t = this.tokens.get(scope);
    if (t) return `Bearer ${t}`;
    if (this.useBasic && this.creds) return `Basic ${Buffer.from(`${this.creds.username}:${this.creds.password}`).toString('base64')}`;
    return undefined;
  }

  /** A failure to connect: an untrusted certificate (exit 69, how to trust it) or an unreachable host (75). */
  private connectError(err: unknown, host: string, what: string): SmolError {
    if (err instanceof StallError) return stallError(err, what, this.registry);
    const trust = tlsTrustError(err, host === new URL(this.base).host ? this.registry : host, what, this.env);
    if (trust) return trust;
    const msg = (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message;
    return new SmolError(`${what} failed: cannot reach ${host}: ${msg}`, ExitCode.tempFail, { cause: err, hint: 'Check the registry address and your network; `--offline` uses only the local cache.' });
  }

  /** One request with the auth dance: on a 401 the challenge is answered once and the request repeated. */
  async request(url: string, init: SmallRequest, o: { scope: string; what: string; ok: number[] }): Promise<RegistryResponse> {
    const abs = new URL(url, this.base);
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = { ...init.headers };
      const auth = this.authorization(o.scope);
      if (auth) headers.authorization = auth;
      let res: SmallResponse;
      try {
        res = await httpRequest(abs, { ...init, headers, tls: this.tls, timeouts: this.timeouts });
      } catch (err) {
        throw this.connectError(err, abs.host, o.what);
      }
      if (o.ok.includes(res.status)) return res;
      const body = res.text().slice(0, 300).trim();
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

  /** GET of a blob into `onBody`, with the auth dance and redirects (Authorization kept only on the registry's origin). */
  private async blobGet(repo: string, digest: string, what: string, onBody: (chunk: Buffer) => void): Promise<number> {
    const scope = `repository:${repo}:pull`;
    let url = new URL(`/v2/${repo}/blobs/${digest}`, this.base);
    for (let attempt = 0, hops = 0; ;) {
      const headers: Record<string, string> = {};
      const auth = url.origin === new URL(this.base).origin ? this.authorization(scope) : undefined;
      if (auth) headers.authorization = auth;
      let res;
      try {
        res = await getBlob(url, { headers, tls: this.tls, onBody, timeouts: this.timeouts });
      } catch (err) {
        if (err instanceof SmolError) throw err;
        if (err instanceof StallError) throw stallError(err, what, this.registry);
        if (err instanceof TransferError) throw new SmolError(`${what} failed: ${err.message}`, ExitCode.tempFail, { cause: err, hint: 'Retry: blobs already verified are kept.' });
        throw this.connectError(err, url.host, what);
      }
      if (res.status === 200) return res.bytes;
      if ([301, 302, 303, 307, 308].includes(res.status) && res.headers.location && hops++ < 5) { url = new URL(res.headers.location, url); continue; }
      if (res.status === 401 && attempt++ === 0 && url.origin === new URL(this.base).origin) {
        await this.answer(parseWwwAuthenticate(res.headers['www-authenticate'] ?? ''), { scope, what });
        continue;
      }
      throw this.statusError(res.status, res.text.slice(0, 300).trim(), what);
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
    let url: URL;
    try { url = new URL(ch.params.realm); } catch { url = new URL('invalid:'); }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new SmolError(`${o.what} failed: ${this.registry} named a token realm that is not an http(s) URL: ${JSON.stringify(ch.params.realm.slice(0, 200))}`, ExitCode.failure, { where: this.registry });
    }
    if (ch.params.service) url.searchParams.set('service', ch.params.service);
    const scope = o.scope || ch.params.scope;
    if (scope) url.searchParams.set('scope', scope);
    const headers: Record<string, string> = {};
    if (this.creds) {
      this.checkRealm(url, o.what);
      headers.authorization = `Basic ${Buffer.from(`${this.creds.username}:${this.creds.password}`).toString('base64')}`;
    }
    const tlsOpts = url.host === new URL(this.base).host ? this.tls : (await trustFor([url.host, this.registry], this.env)).options;
    let res: SmallResponse;
    try {
      res = await httpRequest(url, { headers, tls: tlsOpts, maxBytes: 1 << 20, timeouts: this.timeouts });
    } catch (err) {
      const e = this.connectError(err, url.host, o.what);
      if (e.exitCode === ExitCode.tempFail && !(err instanceof StallError)) throw new SmolError(`${o.what} failed: cannot reach the token service ${url.host}: ${(err as Error).message}`, ExitCode.tempFail, { cause: err });
      throw e;
    }
    if (res.status === 401 || res.status === 403) throw new RegistryAuthError(`${o.what} failed: the token service of ${this.registry} refused ${this.creds ? `user ${this.creds.username}` : 'anonymous access'} (${res.status})`, this.registry);
    if (res.status < 200 || res.status > 299) throw new SmolError(`${o.what} failed: token service ${url.host} answered HTTP ${res.status}`, res.status >= 500 ? ExitCode.tempFail : ExitCode.failure);
    let body: { token?: string; access_token?: string } = {};
    try { body = JSON.parse(res.text()) as typeof body; } catch { /* no token below */ }
    const token = body.token ?? body.access_token;
    if (!token) throw new SmolError(`${o.what} failed: token service ${url.host} sent no token`);
    return token;
  }

  /**
   * A registry names its token service, so a hostile one (or anyone who can rewrite its plain-HTTP
   * answers) could ask for the password to be sent in clear text. Credentials go to a token realm only
   * over HTTPS, or over HTTP to a registry reached over HTTP on purpose (loopback, SMOL_INSECURE_REGISTRIES,
   * --plain-http) when the realm is that registry's host or is listed itself. Nothing is sent otherwise.
   */
  private checkRealm(realm: URL, what: string): void {
    if (realm.protocol === 'https:') return;
    const base = new URL(this.base);
    const insecureOk = base.protocol === 'http:' && (realm.hostname === base.hostname || isInsecureRegistry(realm.host, this.env));
    if (realm.protocol === 'http:' && insecureOk) return;
    throw new SmolError(`${what} failed: ${this.registry} asks for the credentials of user ${this.creds!.username} to be sent to ${realm.origin}${realm.pathname} ${realm.protocol === 'http:' ? 'over plain HTTP' : `over ${realm.protocol}`}; smol sends credentials only over HTTPS, and nothing was sent`, ExitCode.prerequisite, {
      where: `${realm.origin}${realm.pathname}`,
      hint: realm.protocol === 'http:'
        ? `If ${this.registry} and its token service ${realm.host} are on a network you trust, list both in SMOL_INSECURE_REGISTRIES (comma-separated host[:port]) and reach the registry over HTTP; otherwise have the registry name an https:// realm.`
        : 'Have the registry name an https:// token realm.',
    });
  }

  async getManifest(repo: string, reference: string, accept: string[], what: string): Promise<FetchedManifest> {
    const res = await this.request(`/v2/${repo}/manifests/${reference}`, { headers: { accept: accept.join(', ') }, maxBytes: MAX_MANIFEST }, { scope: `repository:${repo}:pull`, what, ok: [200] });
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > MAX_MANIFEST) throw new ArtifactError(`${what} failed: manifest of ${declared} bytes is over the ${MAX_MANIFEST}-byte limit`);
    const bytes = res.body;
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
   * mismatch deletes the temp file and fails with exit 76. Writes are synchronous: each piece lands in the
   * page cache before the socket's read buffer is reused, with no per-chunk allocation or queue.
   */
  async downloadBlob(repo: string, digest: string, size: number | undefined, target: string, o: { what: string; onBytes?: (n: number) => void }): Promise<number> {
    const tmp = tempName(target);
    const h = createHash('sha256');
    let got = 0;
    let fd = -1;
    try {
      fd = openSync(tmp, 'wx', 0o644);
      const file = fd;
      let sinkError: unknown; // a full disk is ENOSPC (73), not a network failure: keep what the sink threw
      await this.blobGet(repo, digest, o.what, (chunk) => {
        try {
          got += chunk.length;
          if (size !== undefined && got > size) throw new ArtifactError(`${o.what} failed: blob ${digest} is larger than the ${size} bytes its manifest declares; it was deleted`, { where: digest });
          h.update(chunk);
          for (let off = 0; off < chunk.length;) off += writeSync(file, chunk, off);
          o.onBytes?.(chunk.length);
        } catch (e) {
          sinkError = e;
          throw e;
        }
      }).catch((e: unknown) => { throw sinkError ?? e; });
      closeSync(fd);
      fd = -1;
      const actual = `sha256:${h.digest('hex')}`;
      if (actual !== digest || (size !== undefined && got !== size)) {
        throw new ArtifactError(`${o.what} failed: blob ${digest} arrived as ${actual} (${got} bytes${size !== undefined ? `, ${size} declared` : ''}); it was deleted`, { where: digest, hint: 'The registry served corrupt or substituted content; nothing was cached.' });
      }
      await rename(tmp, target);
      return got;
    } catch (err) {
      if (fd >= 0) closeSync(fd);
      await rm(tmp, { force: true });
      throw mapFsError(err, o.what);
    }
  }
}

function location(base: string, res: RegistryResponse, what: string): URL {
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
