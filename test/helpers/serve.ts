/**
 * A real `smol serve` (dist/, built by the integration global setup) on a scratch SMOL_HOME, and raw HTTP to it
 * over its Unix socket or TCP. The SDK tests start their server with this too.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { scratchHome, smolSpawn } from './cli.js';

export interface ServeHandle {
  home: string;
  socket: string;
  /** The TCP URL when started with `tcp: true`; its token is `token`. */
  url: string | null;
  token: string | null;
  pid: number;
  child: ChildProcess;
  stderr: () => string;
  stop(): Promise<void>;
}

export interface StartServeOptions { home?: string; tcp?: boolean; args?: string[]; env?: Record<string, string | undefined> }

/** Starts `smol serve --json` and resolves once it printed where it listens. */
export async function startServe(o: StartServeOptions = {}): Promise<ServeHandle> {
  const home = o.home ?? scratchHome('serve');
  const args = ['serve', '--json', ...(o.args ?? [])];
  let token: string | null = null;
  if (o.tcp) {
    token = randomBytes(24).toString('hex');
    const file = path.join(home, 'tokens.txt');
    fs.writeFileSync(file, `# test token\n${token}\n`, { mode: 0o600 });
    args.push('--listen', '127.0.0.1:0', '--token-file', file);
  }
  const child = smolSpawn(args, { home, env: o.env });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
  const info = await new Promise<{ socket: string; url: string | null }>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`smol serve did not start in 30 s: ${err}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) { clearTimeout(timer); resolve(JSON.parse(out.slice(0, nl)) as { socket: string; url: string | null }); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`smol serve exited ${code}: ${err}`)); });
  });
  return {
    home, socket: info.socket, url: info.url, token, pid: child.pid!, child, stderr: () => err,
    stop: () => new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    }),
  };
}

export interface HttpAnswer { status: number; headers: http.IncomingHttpHeaders; text: string; json: () => unknown }

export interface RequestOptions { method?: string; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string>; socket?: string; url?: string; timeoutMs?: number }

/** One request over the socket (`socket`) or to a TCP `url`; the answer read whole. */
export function request(pathname: string, o: RequestOptions): Promise<HttpAnswer> {
  const body = o.rawBody ?? (o.body === undefined ? undefined : JSON.stringify(o.body));
  const target = o.url ? new URL(pathname, o.url) : null;
  return new Promise((resolve, reject) => {
    const req = http.request({
      ...(target ? { host: target.hostname, port: target.port } : { socketPath: o.socket }),
      path: target ? target.pathname + target.search : pathname, method: o.method ?? 'GET',
      headers: { ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}), ...o.headers },
      timeout: o.timeoutMs ?? 120_000,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode!, headers: res.headers, text, json: () => JSON.parse(text) as unknown });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${o.method ?? 'GET'} ${pathname} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}
