/**
 * Authentication for the test registry: an htpasswd file (Debian's `htpasswd -B`, bcrypt as the registry
 * requires) and a tiny Docker token service that checks Basic credentials and signs RS256 JWTs with a
 * throwaway self-signed certificate (made with `openssl`, signed with node:crypto), which docker-registry's
 * `auth: token` verifies against the same certificate.
 */
import { createPrivateKey, randomBytes, sign, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { run } from '../../src/util/exec.js';

export interface TestUser { username: string; password: string }

export async function writeHtpasswd(dir: string, user: TestUser): Promise<string> {
  const file = path.join(dir, 'htpasswd');
  await run('htpasswd', ['-Bbc', file, user.username, user.password]);
  return file;
}

export interface TokenServer { realm: string; service: string; issuer: string; certFile: string; issued: string[]; stop(): Promise<void> }

const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

export async function startTokenServer(dir: string, user: TestUser, o: { tls?: { certFile: string; keyFile: string } } = {}): Promise<TokenServer> {
  const keyFile = path.join(dir, 'token-key.pem');
  const certFile = path.join(dir, 'token-cert.pem');
  await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=smol-test-token']);
  const key = createPrivateKey(await readFile(keyFile));
  const certDer = new X509Certificate(await readFile(certFile)).raw;
  const service = 'smol-test-registry';
  const issuer = 'smol-test-issuer';
  const issued: string[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const auth = req.headers.authorization ?? '';
    const basic = auth.startsWith('Basic ') ? Buffer.from(auth.slice(6), 'base64').toString() : '';
    if (basic !== `${user.username}:${user.password}`) {
      res.writeHead(401, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ details: 'bad or no credentials' }));
    }
    const access = url.searchParams.getAll('scope').filter(Boolean).map((s) => {
      const [type, ...rest] = s.split(':');
      const actions = rest.pop() ?? '';
      return { type, name: rest.join(':'), actions: actions.split(',') };
    });
    const now = Math.floor(Date.now() / 1000);
    const header = b64url(JSON.stringify({ typ: 'JWT', alg: 'RS256', x5c: [certDer.toString('base64')] }));
    const claims = b64url(JSON.stringify({ iss: issuer, sub: user.username, aud: url.searchParams.get('service'), exp: now + 300, nbf: now - 10, iat: now, jti: randomBytes(8).toString('hex'), access }));
    const sig = b64url(sign('sha256', Buffer.from(`${header}.${claims}`), key));
    issued.push(url.searchParams.getAll('scope').join(' '));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ token: `${header}.${claims}.${sig}`, expires_in: 300 }));
  };
  const server = o.tls ? https.createServer({ cert: await readFile(o.tls.certFile), key: await readFile(o.tls.keyFile) }, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return { realm: `${o.tls ? 'https' : 'http'}://127.0.0.1:${port}/token`, service, issuer, certFile, issued, stop: () => new Promise((r) => server.close(() => r())) };
}
