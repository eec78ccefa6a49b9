/**
 * Registries over HTTPS: docker-registry with a server certificate signed by a CA this test makes
 * (openssl), trusted the way Docker trusts one (certs.d/HOST:PORT/ca.crt, here under $SMOL_HOME since tests
 * do not write /etc) or through NODE_EXTRA_CA_CERTS; untrusted, the pull fails naming the registry and how
 * to trust it. A token service over HTTPS with the same CA.
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smol } from '../../helpers/cli.js';
import { filesLayer, pushImage, type PushedImage } from '../../helpers/oci-push.js';
import { hasRegistry, makeClientCert, makeTlsCerts, startRegistry, type TestRegistry } from '../../helpers/registry.js';
import { startTokenServer, type TokenServer } from '../../helpers/registry-auth.js';

const have = hasRegistry() && existsSync('/usr/bin/openssl');
const why = have ? '' : ' (skipped: docker-registry or openssl missing; scripts/setup.sh --test installs them)';
const user = { username: 'bob', password: 'tls secret' };

describe.skipIf(!have)(`registries over HTTPS${why}`, () => {
  let tmp: string;
  let certs: Awaited<ReturnType<typeof makeTlsCerts>>;
  let reg: TestRegistry;
  let tokenReg: TestRegistry;
  let tokens: TokenServer;
  let trusted: string;
  let untrusted: string;
  let pushed: PushedImage;
  let n = 0;
  const assets = () => path.join(tmp, `assets-${n++}`);
  const cli = (args: string[], home: string, a: string, env: Record<string, string> = {}, input?: string) =>
    smol(args, { home, input, env: { SMOL_ASSETS: a, DOCKER_CONFIG: path.join(tmp, 'docker'), ...env }, timeoutMs: 120_000 });
  /** Trusts the test CA in this SMOL_HOME for a registry, the Docker way. */
  const trust = async (home: string, host: string) => {
    await mkdir(path.join(home, 'certs.d', host), { recursive: true });
    await copyFile(certs.caFile, path.join(home, 'certs.d', host, 'ca.crt'));
  };
  const blobFiles = async (a: string) => (await readdir(path.join(a, 'images/blobs/sha256')).catch(() => [] as string[]));
  const refFiles = async (a: string) => (await readdir(path.join(a, 'images/refs')).catch(() => [] as string[]));

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'smol-https-test-'));
    await mkdir(path.join(tmp, 'certs'));
    certs = await makeTlsCerts(path.join(tmp, 'certs'));
    await mkdir(path.join(tmp, 'reg'));
    reg = await startRegistry({ dir: path.join(tmp, 'reg'), tls: certs });
    await mkdir(path.join(tmp, 'token-reg'));
    tokens = await startTokenServer(path.join(tmp, 'token-reg'), user, { tls: certs });
    tokenReg = await startRegistry({ dir: path.join(tmp, 'token-reg'), tls: certs, auth: { token: tokens } });
    trusted = path.join(tmp, 'home-trusted');
    untrusted = path.join(tmp, 'home-untrusted');
    await trust(trusted, reg.host);
    await trust(trusted, tokenReg.host);
    const env = { ...process.env, SMOL_HOME: trusted };
    const big = Buffer.alloc(2 << 20);
    for (let i = 0; i < big.length; i += 4096) big.write(`${i}\n`, i);
    pushed = await pushImage(reg.host, 'tls/img', 'v1', [filesLayer({ 'etc/hello': 'over tls\n' }), filesLayer({ 'big.bin': big.toString('latin1') })], { env });
    await pushImage(tokenReg.host, 'tls/private', 'v1', [filesLayer({ 'secret.txt': 'token over tls\n' })], { env, credentials: user });
  });
  afterAll(async () => {
    await reg?.stop();
    await tokenReg?.stop();
    await tokens?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('pulls over HTTPS when the CA is in $SMOL_HOME/certs.d/HOST:PORT/ca.crt', async () => {
    expect(reg.url.startsWith('https://')).toBe(true);
    const a = assets();
    const r = await cli(['image', 'pull', '--no-build', '--json', `${reg.host}/tls/img:v1`], trusted, a);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { manifestDigest: string; fetchedBlobs: number };
    expect(out.manifestDigest).toBe(pushed.digest);
    expect(out.fetchedBlobs).toBe(3);
    for (const l of pushed.layers) expect((await stat(path.join(a, 'images/blobs/sha256', l.digest.slice(7)))).size).toBe(l.size);
  });

  it('without the CA: exit 69 naming the registry and how to trust it, and nothing cached', async () => {
    const a = assets();
    const r = await cli(['image', 'pull', '--no-build', `${reg.host}/tls/img:v1`], untrusted, a);
    expect(r.code, r.stderr).toBe(69);
    expect(r.stderr).toContain(`the TLS certificate of ${reg.host} is not trusted`);
    expect(r.stderr).toContain(path.join(untrusted, 'certs.d', reg.host, 'ca.crt'));
    expect(r.stderr).toContain(path.join('/etc/docker/certs.d', reg.host, 'ca.crt'));
    expect((await blobFiles(a)).filter((f) => !f.startsWith('.'))).toEqual([]);
    expect(await refFiles(a)).toEqual([]);
    // --json errors carry the same exit code and hint
    const j = await cli(['image', 'pull', '--no-build', '--json', `${reg.host}/tls/img:v1`], untrusted, a);
    expect(j.code).toBe(69);
    expect(JSON.parse(j.stderr).error.hint).toContain('NODE_EXTRA_CA_CERTS');
  });

  it('trusts a CA named by NODE_EXTRA_CA_CERTS (added to the roots) or SSL_CERT_FILE (the whole bundle)', async () => {
    for (const v of ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE']) {
      const a = assets();
      const r = await cli(['image', 'pull', '--no-build', `${reg.host}/tls/img:v1`], untrusted, a, { [v]: certs.caFile });
      expect(r.code, `${v}: ${r.stderr}`).toBe(0);
      expect((await blobFiles(a)).length).toBe(4); // manifest, config, 2 layers
    }
  });

  it('token auth over HTTPS: anonymous is refused (69); after `smol registry login` the pull works', async () => {
    const a = assets();
    const ref = `${tokenReg.host}/tls/private:v1`;
    expect(tokens.realm.startsWith('https://')).toBe(true);
    const anon = await cli(['image', 'pull', '--no-build', ref], trusted, a);
    expect(anon.code, anon.stderr).toBe(69);
    expect(anon.stderr).toContain('refused anonymous access');
    const login = await cli(['registry', 'login', tokenReg.host, '-u', user.username, '--password-stdin'], trusted, a, {}, `${user.password}\n`);
    expect(login.code, login.stderr).toBe(0);
    const before = tokens.issued.length;
    const r = await cli(['image', 'pull', '--no-build', '--json', ref], trusted, a);
    expect(r.code, r.stderr).toBe(0);
    expect(tokens.issued.length).toBeGreaterThan(before);
    expect(tokens.issued.slice(before)).toContain('repository:tls/private:pull');
  });

  it('presents a client certificate from certs.d (NAME.cert + NAME.key) to a registry that requires one', async () => {
    const client = await makeClientCert(path.join(tmp, 'certs'));
    await mkdir(path.join(tmp, 'mtls-reg'));
    const mtls = await startRegistry({ dir: path.join(tmp, 'mtls-reg'), tls: { ...certs, clientCaFile: certs.caFile } });
    try {
      const home = path.join(tmp, 'home-mtls');
      await trust(home, mtls.host);
      const a = assets();
      const refused = await cli(['image', 'pull', '--no-build', `${mtls.host}/tls/img:v1`], home, a);
      expect(refused.code, refused.stderr).toBe(69);
      expect(refused.stderr).toContain(`${mtls.host} refused the TLS handshake: it wants a client certificate`);
      expect(refused.stderr).toContain(path.join(home, 'certs.d', mtls.host, 'client.cert'));
      await copyFile(client.certFile, path.join(home, 'certs.d', mtls.host, 'client.cert'));
      await copyFile(client.keyFile, path.join(home, 'certs.d', mtls.host, 'client.key'));
      await pushImage(mtls.host, 'tls/img', 'v1', [filesLayer({ 'etc/hello': 'mutual\n' })], { env: { ...process.env, SMOL_HOME: home } });
      const r = await cli(['image', 'pull', '--no-build', '--json', `${mtls.host}/tls/img:v1`], home, a);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).fetchedBlobs).toBe(2);
    } finally {
      await mtls.stop();
    }
  });
});
