/**
 * Registries that demand credentials: docker-registry with `auth: token` (a token service in this test
 * signs JWTs with a throwaway certificate) and with htpasswd Basic auth. Credentials come from
 * `smol registry login` or Docker's config.json, for image pulls and pack push/pull alike.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packArtifact } from '../../../src/artifact/index.js';
import { filesLayer, pushImage } from '../../helpers/oci-push.js';
import { hasRegistry, startRegistry, type TestRegistry } from '../../helpers/registry.js';
import { startTokenServer, writeHtpasswd, type TokenServer } from '../../helpers/registry-auth.js';
import { smol } from '../../helpers/cli.js';
import { makeInputs } from '../../unit/artifact/helpers.js';

const have = hasRegistry() && ['/usr/bin/htpasswd', '/usr/bin/openssl'].every((p) => existsSync(p));
const why = have ? '' : ' (skipped: docker-registry, htpasswd (apache2-utils) or openssl missing; scripts/setup.sh --test installs them)';
const user = { username: 'alice', password: 'correct horse' };

describe.skipIf(!have)(`registries that require credentials${why}`, () => {
  let tmp: string;
  let tokenDir: string;
  let basicDir: string;
  let tokens: TokenServer;
  let tokenReg: TestRegistry;
  let basicReg: TestRegistry;
  let home: string;
  const cli = (args: string[], o: { input?: string; env?: Record<string, string> } = {}) =>
    smol(args, { home, input: o.input, env: { SMOL_ASSETS: path.join(tmp, 'assets'), DOCKER_CONFIG: path.join(tmp, 'docker'), ...o.env }, timeoutMs: 120_000 });

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'smol-auth-test-'));
    home = path.join(tmp, 'home');
    tokenDir = path.join(tmp, 'token-reg');
    basicDir = path.join(tmp, 'basic-reg');
    await mkdir(tokenDir);
    await mkdir(basicDir);
    tokens = await startTokenServer(tokenDir, user);
    tokenReg = await startRegistry({ dir: tokenDir, auth: { token: tokens } });
    basicReg = await startRegistry({ dir: basicDir, auth: { htpasswd: await writeHtpasswd(basicDir, user) } });
    for (const r of [tokenReg, basicReg]) await pushImage(r.host, 'team/img', 'v1', [filesLayer({ 'secret.txt': `from ${r.host}\n` })], { credentials: user });
  });
  afterAll(async () => {
    await tokenReg?.stop();
    await basicReg?.stop();
    await tokens?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('token auth: refuses anonymous pulls with exit 69 and a login hint; `smol registry login` then pulls', async () => {
    const ref = `${tokenReg.host}/team/img:v1`;
    const anon = await cli(['image', 'pull', '--no-build', ref]);
    expect(anon.code, anon.stderr).toBe(69);
    expect(anon.stderr).toContain('refused anonymous access');
    expect(anon.stderr).toContain(`smol registry login ${tokenReg.host}`);
    const bad = await cli(['registry', 'login', tokenReg.host, '-u', user.username, '--password-stdin'], { input: 'wrong\n' });
    expect(bad.code).toBe(69);
    expect(bad.stderr).toContain('refused user alice');
    await expect(stat(path.join(home, 'registry-auth.json'))).rejects.toThrow(); // nothing stored for a refused login
    const login = await cli(['registry', 'login', tokenReg.host, '-u', user.username, '--password-stdin'], { input: `${user.password}\n` });
    expect(login.code, login.stderr).toBe(0);
    const file = path.join(home, 'registry-auth.json');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readFile(file, 'utf8')).not.toContain(user.password); // base64, as Docker stores it
    const pull = await cli(['image', 'pull', '--no-build', '--json', ref]);
    expect(pull.code, pull.stderr).toBe(0);
    expect(JSON.parse(pull.stdout).fetchedBlobs).toBe(2);
    expect(tokens.issued).toContain(`repository:team/img:pull`);
    const out = await cli(['image', 'logout', tokenReg.host]);
    expect(out.stdout).toContain(`logged out of ${tokenReg.host}`);
    expect((await cli(['image', 'pull', '--no-build', `${tokenReg.host}/team/img:v2`])).code).toBe(69);
  });

  it('htpasswd Basic auth: credentials from ~/.docker/config.json (DOCKER_CONFIG) for pulls and pack push/pull', async () => {
    const anon = await cli(['image', 'pull', '--no-build', `${basicReg.host}/team/img:v1`]);
    expect(anon.code).toBe(69);
    expect(anon.stderr).toMatch(/requires authentication \(basic\)/);
    await mkdir(path.join(tmp, 'docker'), { recursive: true });
    await writeFile(path.join(tmp, 'docker', 'config.json'), JSON.stringify({ auths: { [basicReg.host]: { auth: Buffer.from(`${user.username}:${user.password}`).toString('base64') } } }));
    const pull = await cli(['image', 'pull', '--no-build', `${basicReg.host}/team/img:v1`]);
    expect(pull.code, pull.stderr).toBe(0);

    const art = path.join(tmp, 'm.smolmachine');
    const inputs = path.join(tmp, 'pack-inputs');
    await mkdir(inputs);
    await packArtifact({ ...(await makeInputs(inputs, { disk: true })), out: art, createdAt: '2026-01-01T00:00:00Z' });
    for (const r of [basicReg, tokenReg]) {
      if (r === tokenReg) expect((await cli(['registry', 'login', r.host, '-u', user.username, '-p', user.password])).code).toBe(0);
      const push = await cli(['pack', 'push', art, `${r.host}/team/machine:v1`, '--json']);
      expect(push.code, push.stderr).toBe(0);
      const pulled = path.join(tmp, `pulled-${r.host.replace(/\W/g, '_')}.smolmachine`);
      const pull2 = await cli(['pack', 'pull', `${r.host}/team/machine:v1`, '-o', pulled]);
      expect(pull2.code, pull2.stderr).toBe(0);
      expect((await readFile(pulled)).equals(await readFile(art))).toBe(true);
    }
    await writeFile(path.join(tmp, 'docker', 'config.json'), '{}');
    const denied = await cli(['pack', 'pull', `${basicReg.host}/team/machine:v1`, '-o', path.join(tmp, 'x.smolmachine')]);
    expect(denied.code).toBe(69);
  });

  it('credential helpers: credsStore and credHelpers from config.json, run from PATH with the registry on stdin', async () => {
    const bin = path.join(tmp, 'helper-bin');
    await mkdir(bin, { recursive: true });
    const log = path.join(tmp, 'helper.log');
    // a docker-credential-helpers lookalike: JSON for the Basic registry, "not found" (exit 1) for anything else
    await writeFile(path.join(bin, 'docker-credential-smoltest'), [
      '#!/bin/sh',
      'read -r server',
      `echo "$1 $server" >> '${log}'`,
      `if [ "$server" = '${basicReg.host}' ]; then printf '{"ServerURL":"%s","Username":"${user.username}","Secret":"${user.password}"}' "$server"; exit 0; fi`,
      'echo "credentials not found in native keychain"; exit 1',
      '',
    ].join('\n'), { mode: 0o755 });
    const env = { PATH: `${bin}:${process.env.PATH}`, SMOL_ASSETS: path.join(tmp, 'assets-helper') };
    await mkdir(path.join(tmp, 'docker'), { recursive: true });
    await writeFile(path.join(tmp, 'docker', 'config.json'), JSON.stringify({ credsStore: 'smoltest' }));
    const pull = await cli(['image', 'pull', '--no-build', '--json', `${basicReg.host}/team/img:v1`], { env });
    expect(pull.code, pull.stderr).toBe(0);
    expect(JSON.parse(pull.stdout).fetchedBlobs).toBe(2);
    expect(await readFile(log, 'utf8')).toContain(`get ${basicReg.host}`);
    // the helper has nothing for the token registry: anonymous, refused with the login hint (as docker pull)
    const anon = await cli(['image', 'pull', '--no-build', `${tokenReg.host}/team/img:v1`], { env: { ...env, SMOL_HOME: path.join(tmp, 'home-helper') } });
    expect(anon.code, anon.stderr).toBe(69);
    expect(anon.stderr).toContain('refused anonymous access');
    // credHelpers names a helper for one registry; a missing one is exit 69 naming it
    await writeFile(path.join(tmp, 'docker', 'config.json'), JSON.stringify({ credsStore: 'smoltest', credHelpers: { [basicReg.host]: 'nosuchhelper' } }));
    const missing = await cli(['image', 'pull', '--no-build', `${basicReg.host}/team/img:v1`], { env: { ...env, SMOL_ASSETS: path.join(tmp, 'assets-helper2') } });
    expect(missing.code).toBe(69);
    expect(missing.stderr).toContain('docker-credential-nosuchhelper');
    await writeFile(path.join(tmp, 'docker', 'config.json'), '{}');
  });
});
