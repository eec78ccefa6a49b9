/**
 * A real OCI registry for tests: Debian's `docker-registry` (distribution v2) on loopback, filesystem
 * storage in a temp dir, torn down by stop(). Installed by `scripts/setup.sh --test`.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn } from '../../src/util/exec.js';

export const REGISTRY_BIN = '/usr/bin/docker-registry';
export const hasRegistry = (): boolean => existsSync(REGISTRY_BIN);

export interface TestRegistry { host: string; url: string; dir: string; stop(): Promise<void> }

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export type RegistryAuth = { htpasswd: string } | { token: { realm: string; service: string; issuer: string; certFile: string } };

export async function startRegistry(o: { auth?: RegistryAuth; dir?: string } = {}): Promise<TestRegistry> {
  const dir = o.dir ?? await mkdtemp(path.join(os.tmpdir(), 'smol-registry-'));
  const port = await freePort();
  const config = path.join(dir, 'config.yml');
  await writeFile(config, [
    'version: 0.1',
    'log:',
    '  level: error',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${path.join(dir, 'data')}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    ...(o.auth && 'htpasswd' in o.auth ? ['auth:', '  htpasswd:', '    realm: smol-test', `    path: ${o.auth.htpasswd}`] : []),
    ...(o.auth && 'token' in o.auth ? ['auth:', '  token:', `    realm: ${o.auth.token.realm}`, `    service: ${o.auth.token.service}`, `    issuer: ${o.auth.token.issuer}`, `    rootcertbundle: ${o.auth.token.certFile}`] : []),
    '',
  ].join('\n'));
  const { child } = await spawn(REGISTRY_BIN, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
  const host = `127.0.0.1:${port}`;
  const stop = async () => {
    child.kill('SIGTERM');
    await child.catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 15_000;
  for (;;) {
    const ok = await fetch(`http://${host}/v2/`).then((r) => r.status === 200 || r.status === 401, () => false);
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`docker-registry did not start on ${host}: ${stderr.trim().slice(-500)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { host, url: `http://${host}`, dir, stop };
}
