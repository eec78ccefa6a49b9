import { mkdtemp, readFile, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findCredentials, normalizeRegistry, parseWwwAuthenticate, removeCredentials, storeCredentials } from '../../../src/registry/index.js';

describe('parseWwwAuthenticate', () => {
  it('reads a Bearer challenge as registries send it', () => {
    expect(parseWwwAuthenticate('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull"')).toEqual([
      { scheme: 'bearer', params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/alpine:pull' } },
    ]);
  });
  it('keeps commas and escaped quotes inside quoted values, lower-cases names, accepts tokens unquoted', () => {
    expect(parseWwwAuthenticate('bearer Realm="http://t/x?a=1,b=2", Scope="repository:a:pull,push" , error=insufficient_scope, note="say \\"hi\\""')).toEqual([
      { scheme: 'bearer', params: { realm: 'http://t/x?a=1,b=2', scope: 'repository:a:pull,push', error: 'insufficient_scope', note: 'say "hi"' } },
    ]);
  });
  it('splits several challenges, including Basic', () => {
    expect(parseWwwAuthenticate('Basic realm="smol-test", Bearer realm="http://t",service=s')).toEqual([
      { scheme: 'basic', params: { realm: 'smol-test' } },
      { scheme: 'bearer', params: { realm: 'http://t', service: 's' } },
    ]);
    expect(parseWwwAuthenticate('')).toEqual([]);
    expect(parseWwwAuthenticate('Negotiate abc==, Basic realm=x')).toEqual([{ scheme: 'negotiate', params: {} }, { scheme: 'basic', params: { realm: 'x' } }]);
  });
});

describe('credentials', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'smol-auth-'));
    env = { SMOL_HOME: path.join(dir, 'home'), DOCKER_CONFIG: path.join(dir, 'docker') };
    await mkdir(env.DOCKER_CONFIG!, { recursive: true });
  });
  afterEach(async () => { await rm(dir, { recursive: true, force: true }); });

  it("reads Docker's config.json auths (base64 user:password) under DOCKER_CONFIG, Hub under its v1 key", async () => {
    await writeFile(path.join(env.DOCKER_CONFIG!, 'config.json'), JSON.stringify({ auths: {
      'https://index.docker.io/v1/': { auth: Buffer.from('hubuser:hubpass').toString('base64') },
      'reg.example:5000': { auth: Buffer.from('bob:pa:ss').toString('base64') },
    } }));
    expect(await findCredentials('docker.io', env)).toMatchObject({ username: 'hubuser', password: 'hubpass' });
    expect(await findCredentials('reg.example:5000', env)).toMatchObject({ username: 'bob', password: 'pa:ss' });
    expect(await findCredentials('other.example', env)).toBeNull();
  });

  it('stores a login with mode 0600, prefers it over Docker\'s, and logs out', async () => {
    await writeFile(path.join(env.DOCKER_CONFIG!, 'config.json'), JSON.stringify({ auths: { 'r.io': { auth: Buffer.from('docker:d').toString('base64') } } }));
    const file = await storeCredentials('r.io', { username: 'smol', password: 's' }, env);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ auths: { 'r.io': { auth: Buffer.from('smol:s').toString('base64') } } });
    expect(await findCredentials('r.io', env)).toMatchObject({ username: 'smol', source: file });
    expect(await removeCredentials('r.io', env)).toBe(true);
    expect(await removeCredentials('r.io', env)).toBe(false);
    expect(await findCredentials('r.io', env)).toMatchObject({ username: 'docker' });
  });

  it('names a config file that is not JSON or an auth that is not user:password', async () => {
    await writeFile(path.join(env.DOCKER_CONFIG!, 'config.json'), '{nope');
    await expect(findCredentials('r.io', env)).rejects.toThrow(/config.json is not JSON/);
    await writeFile(path.join(env.DOCKER_CONFIG!, 'config.json'), JSON.stringify({ auths: { 'r.io': { auth: Buffer.from('nocolon').toString('base64') } } }));
    await expect(findCredentials('r.io', env)).rejects.toThrow(/not base64 of user:password/);
  });

  it('normalizes what people type after login', () => {
    expect(normalizeRegistry(undefined)).toBe('docker.io');
    expect(normalizeRegistry('https://index.docker.io/v1/')).toBe('docker.io');
    expect(normalizeRegistry('https://GHCR.io/')).toBe('ghcr.io');
    expect(normalizeRegistry('localhost:5000')).toBe('localhost:5000');
  });
});

describe('credential helpers (credsStore, credHelpers)', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const config = (c: object) => writeFile(path.join(env.DOCKER_CONFIG!, 'config.json'), JSON.stringify(c));
  /**
   * A docker-credential-NAME on PATH that logs what it was asked (argv, stdin) and answers like
   * docker-credential-helpers: JSON for known servers, "credentials not found" + exit 1 otherwise.
   */
  const helper = async (name: string, known: Record<string, string>, o: { exit?: number; say?: string } = {}) => {
    const cases = Object.entries(known).map(([server, json]) => `  '${server}') printf '%s' '${json}';;`).join('\n');
    const body = o.exit !== undefined
      ? `echo '${o.say ?? ''}'; exit ${o.exit}`
      : `case "$server" in\n${cases}\n  *) echo 'credentials not found in native keychain'; exit 1;;\nesac`;
    const file = path.join(dir, 'bin', `docker-credential-${name}`);
    await writeFile(file, `#!/bin/sh\nread -r server\necho "$0 $* <$server>" >> '${path.join(dir, 'calls.log')}'\n${body}\n`, { mode: 0o755 });
  };
  const calls = () => readFile(path.join(dir, 'calls.log'), 'utf8').then((t) => t.trim().split('\n').map((l) => l.replace(/^\S*\//, '')), () => [] as string[]);

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'smol-credhelper-'));
    env = { SMOL_HOME: path.join(dir, 'home'), DOCKER_CONFIG: path.join(dir, 'docker'), PATH: `${path.join(dir, 'bin')}:${process.env.PATH}` };
    await mkdir(env.DOCKER_CONFIG!, { recursive: true });
    await mkdir(path.join(dir, 'bin'));
  });
  afterEach(async () => { await rm(dir, { recursive: true, force: true }); });

  it('runs `docker-credential-NAME get` with the server on stdin; Hub is asked as https://index.docker.io/v1/', async () => {
    await helper('store', {
      'reg.example:5000': '{"ServerURL":"reg.example:5000","Username":"carol","Secret":"s3cret"}',
      'https://index.docker.io/v1/': '{"ServerURL":"https://index.docker.io/v1/","Username":"hub","Secret":"h"}',
    });
    await config({ credsStore: 'store', auths: { 'reg.example:5000': {} } });
    expect(await findCredentials('reg.example:5000', env)).toEqual({ username: 'carol', password: 's3cret', source: 'docker-credential-store' });
    expect(await findCredentials('docker.io', env)).toMatchObject({ username: 'hub', password: 'h' });
    expect(await calls()).toEqual(['docker-credential-store get <reg.example:5000>', 'docker-credential-store get <https://index.docker.io/v1/>']);
  });

  it('"credentials not found" means anonymous, as in Docker: the auths entry is not consulted', async () => {
    await helper('store', {});
    await config({ credsStore: 'store', auths: { 'r.io': { auth: Buffer.from('file:f').toString('base64') } } });
    expect(await findCredentials('r.io', env)).toBeNull();
  });

  it('a credHelpers entry wins over credsStore for its registry; smol\'s own login wins over both', async () => {
    await helper('store', { 'a.io': '{"Username":"from-store","Secret":"1"}', 'b.io': '{"Username":"from-store","Secret":"1"}' });
    await helper('special', { 'b.io': '{"Username":"from-special","Secret":"2"}' });
    await config({ credsStore: 'store', credHelpers: { 'b.io': 'special' } });
    expect(await findCredentials('a.io', env)).toMatchObject({ username: 'from-store' });
    expect(await findCredentials('b.io', env)).toMatchObject({ username: 'from-special', source: 'docker-credential-special' });
    await storeCredentials('b.io', { username: 'mine', password: 'm' }, env);
    expect(await findCredentials('b.io', env)).toMatchObject({ username: 'mine' });
  });

  it('a failing, missing or malformed helper fails with exit 69 naming the helper and the config file', async () => {
    const file = path.join(env.DOCKER_CONFIG!, 'config.json');
    await helper('broken', {}, { exit: 3, say: 'gpg: decryption failed' });
    await config({ credHelpers: { 'r.io': 'broken' } });
    await expect(findCredentials('r.io', env)).rejects.toMatchObject({ exitCode: 69, where: file, message: expect.stringMatching(/docker-credential-broken get exited 3: gpg: decryption failed/) });
    await config({ credsStore: 'absent' });
    await expect(findCredentials('r.io', env)).rejects.toMatchObject({ exitCode: 69, message: expect.stringContaining('docker-credential-absent (named in') });
    await helper('garbled', { 'r.io': 'not json' });
    await config({ credsStore: 'garbled' });
    await expect(findCredentials('r.io', env)).rejects.toThrow(/did not print \{"Username", "Secret"\} JSON/);
    await helper('oauth', { 'r.io': '{"Username":"<token>","Secret":"refresh"}' });
    await config({ credsStore: 'oauth' });
    await expect(findCredentials('r.io', env)).rejects.toThrow(/identity token/);
    await config({ credsStore: '../../bin/sh' });
    await expect(findCredentials('r.io', env)).rejects.toThrow(/not a plain name/);
  });
});
