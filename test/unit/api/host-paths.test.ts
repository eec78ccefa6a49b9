/**
 * `smol serve --host-paths`: a token may name host paths only inside the allowed roots (symlinks followed),
 * and no secret env. The refusals come before any machine, artifact or file is touched: the server here has
 * no machine service at all, so reaching one would fail differently.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostPathPolicy } from '../../../src/api/host-paths.js';
import { Router } from '../../../src/api/router.js';
import { allRoutes } from '../../../src/api/routes/index.js';
import { startApiServer, type ApiServer } from '../../../src/api/server.js';
import type { ApiContext } from '../../../src/api/context.js';
import { smolfileSchema } from '../../../src/smolfile/schema.js';
import { request } from '../../helpers/serve.js';

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'smol-hostpaths-')));
const allowed = path.join(dir, 'allowed');
const outside = path.join(dir, 'allowed-not'); // shares the root's name as a prefix
fs.mkdirSync(allowed);
fs.mkdirSync(outside);
fs.writeFileSync(path.join(outside, 'key'), 'secret');
fs.symlinkSync(outside, path.join(allowed, 'escape'));
const policy = HostPathPolicy.parse(allowed);
const spec = (o: object) => smolfileSchema.parse(o);

let srv: ApiServer;
beforeAll(async () => {
  const ctx = { home: dir, version: 'test', hostPaths: policy, metrics: { requests: { inc: () => undefined } } } as unknown as ApiContext;
  srv = await startApiServer(ctx, new Router(allRoutes), { socket: null, listen: { host: '127.0.0.1', port: 0 } });
});
afterAll(async () => { await srv?.close(); fs.rmSync(dir, { recursive: true, force: true }); });

describe('HostPathPolicy', () => {
  it('allows paths inside a root, existing or not yet, and the root itself', () => {
    expect(() => policy.check(allowed, 'p')).not.toThrow();
    expect(() => policy.check(path.join(allowed, 'new/dir/out.smolmachine'), 'p')).not.toThrow();
    expect(() => policy.check(`${outside}/../allowed/x`, 'p')).not.toThrow();
  });

  it('refuses a sibling that shares the prefix, a .. walk out, and a symlink that points out', () => {
    for (const p of [outside, path.join(outside, 'key'), `${allowed}/../allowed-not/key`, path.join(allowed, 'escape/key'), path.join(allowed, 'escape/new-file'), '/etc/passwd']) {
      expect(() => policy.check(p, 'output'), p).toThrow(/outside what this server allows/);
    }
  });

  it('checks every host path of a machine spec and refuses secret env', () => {
    expect(() => policy.checkSpec(spec({ volumes: [{ host: path.join(allowed, 'v'), guest: '/v' }] }), 'body')).not.toThrow();
    expect(() => policy.checkSpec(spec({ volumes: [{ host: path.join(allowed, 'v'), guest: '/v' }, { host: '/', guest: '/host' }] }), 'body')).toThrow(expect.objectContaining({ where: 'body.volumes[1]' }));
    expect(() => policy.checkSpec(spec({ secrets: { files: { k: path.join(outside, 'key') } } }), 'smolfile')).toThrow(expect.objectContaining({ where: 'smolfile.secrets.files.k' }));
    expect(() => policy.checkSpec(spec({ secrets: { env: ['AWS_SECRET_ACCESS_KEY'] } }), 'smolfile')).toThrow(/server's environment/);
    expect(() => policy.checkSpec(spec({ image: outside }), 'body')).toThrow(expect.objectContaining({ where: 'body.image' }));
    // a name that is no host path is a registry reference, not a path: not this policy's business
    expect(() => policy.checkSpec(spec({ image: 'debian:bookworm' }), 'body')).not.toThrow();
  });

  it('`none` allows no host path; no flag allows every one; a bad root is a usage error', () => {
    expect(() => HostPathPolicy.parse('none').check(allowed, 'p')).toThrow(expect.objectContaining({ hint: expect.stringMatching(/takes no host paths/) }));
    expect(() => HostPathPolicy.parse(undefined).check('/etc/passwd', 'p')).not.toThrow();
    expect(() => HostPathPolicy.parse(path.join(dir, 'missing'))).toThrow(expect.objectContaining({ exitCode: 64 }));
  });
});

describe('routes under --host-paths', () => {
  const post = (route: string, body: object) => request(route, { url: srv.url!, method: 'POST', body });

  it('refuses host paths outside the roots with 403 before touching anything', async () => {
    const cases: [string, object, string][] = [
      ['/v1/machines', { volumes: [`${outside}:/mnt`] }, 'body.volumes[0]'],
      ['/v1/machines', { from: path.join(outside, 'a.smolmachine') }, 'from'],
      ['/v1/machines', { smolfile: { secrets: { files: { k: path.join(allowed, 'escape/key') } } } }, 'smolfile.secrets.files.k'],
      ['/v1/run', { argv: ['true'], smolfile: { secrets: { env: ['HOME'] } } }, 'smolfile.secrets.env'],
      ['/v1/pack', { machine: 'm', output: path.join(outside, 'out.smolmachine') }, 'output'],
      ['/v1/pack', { machine: 'm', output: path.join(allowed, 'out.smolmachine'), sign: path.join(outside, 'key') }, 'sign'],
      ['/v1/pack/verify', { path: path.join(outside, 'key') }, 'path'],
      ['/v1/pack/run', { path: path.join(allowed, 'escape/key') }, 'path'],
    ];
    for (const [route, body, where] of cases) {
      const r = await post(route, body);
      expect(r.status, `${route} ${JSON.stringify(body)}`).toBe(403);
      expect(r.json()).toMatchObject({ error: { code: 'host_path_refused', where } });
    }
    expect(fs.existsSync(path.join(outside, 'out.smolmachine'))).toBe(false);
  });

  it('lets a path inside a root through to the route itself', async () => {
    const r = await post('/v1/pack/verify', { path: path.join(allowed, 'none.smolmachine') });
    expect(r.status).toBe(404); // past the policy: the artifact is simply not there
  });
});
