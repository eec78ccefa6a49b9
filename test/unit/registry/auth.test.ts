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
