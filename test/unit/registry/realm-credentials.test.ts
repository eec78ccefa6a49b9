/**
 * A registry names the token service its clients send their password to. Served over HTTPS (its CA
 * trusted through $SMOL_HOME/certs.d, as for Docker) and naming a plain-http:// realm, it must not get
 * the password sent in clear text; an https:// realm, or an http:// one of a registry that is itself
 * reached over HTTP on purpose (loopback here), still gets it.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SmolError } from '../../../src/errors/index.js';
import { RegistryClient } from '../../../src/registry/index.js';
import { startHostile, type Handler, type HostileServer } from '../../helpers/registry-hostile.js';
import { makeTlsCerts } from '../../helpers/registry.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'realm-'));
const servers: HostileServer[] = [];
let certs: Awaited<ReturnType<typeof makeTlsCerts>>;
beforeAll(async () => { certs = await makeTlsCerts(tmp); });
afterAll(async () => { await Promise.all(servers.map((s) => s.stop())); rmSync(tmp, { recursive: true, force: true }); });

const creds = { username: 'alice', password: 's3cret' };
const BASIC = `Basic ${Buffer.from('alice:s3cret').toString('base64')}`;
const MANIFEST = JSON.stringify({ schemaVersion: 2, config: {}, layers: [] });

/** A token service that hands out "t" to anyone, recording who asked with what. */
const tokenService: Handler = (_req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"token":"t"}'); };

/** A registry that wants a bearer token from `realm()` and serves a manifest to whoever has one. */
const registry = (realm: (host: string) => string): Handler => (req, res, host) => {
  if (req.headers.authorization === 'Bearer t') { res.writeHead(200, { 'content-type': 'application/json' }); res.end(MANIFEST); return; }
  if (req.url === '/token' || req.url?.startsWith('/token?')) return tokenService(req, res, host);
  res.writeHead(401, { 'www-authenticate': `Bearer realm="${realm(host)}",service="reg"` });
  res.end();
};

async function https(handler: Handler): Promise<{ s: HostileServer; env: NodeJS.ProcessEnv }> {
  const s = await startHostile(handler, { tls: certs });
  servers.push(s);
  const home = path.join(tmp, `home-${s.port}`);
  mkdirSync(path.join(home, 'certs.d', s.host), { recursive: true });
  copyFileSync(certs.caFile, path.join(home, 'certs.d', s.host, 'ca.crt'));
  return { s, env: { SMOL_HOME: home } };
}

describe('credentials and token realms', () => {
  it('does not send credentials to a plain-http realm named by an HTTPS registry', async () => {
    const realm = await startHostile(tokenService);
    servers.push(realm);
    const { s, env } = await https(registry(() => `http://${realm.host}/token`));
    const c = await RegistryClient.open(s.host, s.host, { credentials: creds, env });
    expect(c.base).toBe(`https://${s.host}`);
    const e = await c.getManifest('x', 'latest', ['application/json'], 'pull x').then(() => null, (err: unknown) => err);
    expect(realm.seen.filter((r) => r.authorization)).toEqual([]);
    expect(e).toBeInstanceOf(SmolError);
    expect((e as SmolError).exitCode).toBe(69);
    expect((e as SmolError).message).toContain(`sent to http://${realm.host}/token over plain HTTP`);
    expect((e as SmolError).hint).toContain('SMOL_INSECURE_REGISTRIES');
  });

  it('sends them to an https realm', async () => {
    const { s, env } = await https(registry((host) => `https://${host}/token`));
    const c = await RegistryClient.open(s.host, s.host, { credentials: creds, env });
    const m = await c.getManifest('x', 'latest', ['application/json'], 'pull x');
    expect(m.bytes.toString()).toBe(MANIFEST);
    expect(s.seen.find((r) => r.url.startsWith('/token'))?.authorization).toBe(BASIC);
  });

  it('sends them over HTTP to a registry reached over HTTP on purpose (loopback)', async () => {
    const s = await startHostile(registry((host) => `http://${host}/token`));
    servers.push(s);
    const c = await RegistryClient.open(s.host, s.host, { plainHttp: true, credentials: creds, env: { SMOL_HOME: tmp } });
    await c.getManifest('x', 'latest', ['application/json'], 'pull x');
    expect(s.seen.find((r) => r.url.startsWith('/token'))?.authorization).toBe(BASIC);
  });

  it('names a realm that is not an http(s) URL instead of crashing', async () => {
    const { s, env } = await https(registry(() => 'file:///etc/passwd'));
    const c = await RegistryClient.open(s.host, s.host, { credentials: null, env });
    await expect(c.getManifest('x', 'latest', ['application/json'], 'pull x')).rejects.toThrow(/named a token realm that is not an http\(s\) URL/);
    const bad = await https(registry(() => 'not a url'));
    const c2 = await RegistryClient.open(bad.s.host, bad.s.host, { credentials: null, env: bad.env });
    await expect(c2.getManifest('x', 'latest', ['application/json'], 'pull x')).rejects.toBeInstanceOf(SmolError);
  });
});
