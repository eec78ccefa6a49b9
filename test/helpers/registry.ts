/**
 * A real OCI registry for tests: Debian's `docker-registry` (distribution v2) on loopback, filesystem
 * storage in a temp dir, torn down by stop(). Installed by `scripts/setup.sh --test`.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { run, spawn } from '../../src/util/exec.js';

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

/** A CA and a server certificate for 127.0.0.1 signed by it (openssl), for a registry over HTTPS. */
export async function makeTlsCerts(dir: string): Promise<{ caFile: string; certFile: string; keyFile: string }> {
  const f = (n: string) => path.join(dir, n);
  await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '1', '-subj', '/CN=smol test CA']);
  await run('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1']);
  await writeFile(f('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  await run('openssl', ['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.crt'), '-days', '1', '-extfile', f('san.ext')]);
  return { caFile: f('ca.crt'), certFile: f('server.crt'), keyFile: f('server.key') };
}

/** A client certificate signed by the CA of makeTlsCerts (for a registry that asks for one). */
export async function makeClientCert(dir: string): Promise<{ certFile: string; keyFile: string }> {
  const f = (n: string) => path.join(dir, n);
  await run('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('client.key'), '-out', f('client.csr'), '-subj', '/CN=smol test client']);
  await writeFile(f('client.ext'), 'extendedKeyUsage=clientAuth\n');
  await run('openssl', ['x509', '-req', '-in', f('client.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('client.cert'), '-days', '1', '-extfile', f('client.ext')]);
  return { certFile: f('client.cert'), keyFile: f('client.key') };
}

export async function startRegistry(o: { auth?: RegistryAuth; dir?: string; tls?: { certFile: string; keyFile: string; caFile: string; /** require client certificates signed by this CA */ clientCaFile?: string } } = {}): Promise<TestRegistry> {
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
    ...(o.tls ? ['  tls:', `    certificate: ${o.tls.certFile}`, `    key: ${o.tls.keyFile}`] : []),
    ...(o.tls?.clientCaFile ? ['    clientcas:', `      - ${o.tls.clientCaFile}`] : []),
    ...(o.auth && 'htpasswd' in o.auth ? ['auth:', '  htpasswd:', '    realm: smol-test', `    path: ${o.auth.htpasswd}`] : []),
    ...(o.auth && 'token' in o.auth ? ['auth:', '  token:', `    realm: ${o.auth.token.realm}`, `    service: ${o.auth.token.service}`, `    issuer: ${o.auth.token.issuer}`, `    rootcertbundle: ${o.auth.token.certFile}`] : []),
    '',
  ].join('\n'));
  const { child } = await spawn(REGISTRY_BIN, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
  const host = `127.0.0.1:${port}`;
  const url = `${o.tls ? 'https' : 'http'}://${host}`;
  const ca = o.tls ? await readFile(o.tls.caFile) : undefined;
  const stop = async () => {
    child.kill('SIGTERM');
    await child.catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 15_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      (o.tls ? https : http).get(`${url}/v2/`, { ca }, (r) => { r.resume(); resolve(r.statusCode === 200 || r.statusCode === 401); })
        .on('error', (e: NodeJS.ErrnoException) => resolve(Boolean(o.tls?.clientCaFile) && /ALERT|ECONNRESET/.test(`${e.code}`))); // up, wants a client certificate
    });
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`docker-registry did not start on ${host}: ${stderr.trim().slice(-500)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { host, url, dir, stop };
}
