/**
 * Small registry requests (manifests, tokens, HEAD, uploads) over node:http/https, which take the TLS trust
 * smol computes per registry (built-in fetch cannot without undici's Agent). Blob bodies take the faster
 * path in blob-get.ts. Follows redirects (registries send blobs to storage), dropping Authorization when
 * one leaves the registry's origin. Every phase has a deadline (timeouts.ts): these answers are small, so
 * the response deadline runs to the end of the body.
 */
import http from 'node:http';
import https from 'node:https';
import type tls from 'node:tls';
import { DEFAULT_TIMEOUTS, StallError, type Timeouts } from './timeouts.js';

export interface SmallResponse {
  status: number;
  headers: { get(name: string): string | null };
  body: Buffer;
  text(): string;
}

export interface SmallRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer | string;
  tls?: tls.ConnectionOptions;
  /** Bodies longer than this are cut off (the caller checks sizes it cares about). */
  maxBytes?: number;
  timeouts?: Timeouts;
}

const REDIRECTS = [301, 302, 303, 307, 308];

export function httpRequest(url: URL, o: SmallRequest = {}, redirects = 5): Promise<SmallResponse> {
  const t = o.timeouts ?? DEFAULT_TIMEOUTS;
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const body = typeof o.body === 'string' ? Buffer.from(o.body) : o.body;
    const headers: Record<string, string> = { 'user-agent': 'smol', ...o.headers };
    if (body && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-length')) headers['content-length'] = String(body.length);
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const settle = (err: Error | null, r?: SmallResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) { req.destroy(); reject(err); } else resolve(r!);
    };
    const arm = (phase: 'connect' | 'response', ms: number) => {
      clearTimeout(timer);
      timer = setTimeout(() => settle(new StallError(phase, url, ms)), ms);
    };
    const req = mod.request(url, { method: o.method ?? 'GET', headers, ...(url.protocol === 'https:' ? o.tls : {}) }, (res) => {
      const loc = res.headers.location;
      const method = o.method ?? 'GET';
      if (res.statusCode && REDIRECTS.includes(res.statusCode) && loc && redirects > 0 && (method === 'GET' || method === 'HEAD')) {
        clearTimeout(timer);
        settled = true;
        res.resume();
        const next = new URL(loc, url);
        const h = { ...o.headers };
        if (next.origin !== url.origin) for (const k of Object.keys(h)) if (k.toLowerCase() === 'authorization') delete h[k];
        httpRequest(next, { ...o, headers: h }, redirects - 1).then(resolve, reject);
        return;
      }
      const chunks: Buffer[] = [];
      let n = 0;
      const max = o.maxBytes ?? 8 << 20;
      res.on('data', (c: Buffer) => { if (n < max) chunks.push(c); n += c.length; });
      res.on('error', (e) => settle(e));
      res.on('close', () => { if (!res.complete) settle(new Error(`${url.host} closed the connection mid-answer`)); });
      res.on('end', () => {
        const all = Buffer.concat(chunks);
        settle(null, {
          status: res.statusCode ?? 0,
          headers: { get: (name) => { const v = res.headers[name.toLowerCase()]; return v === undefined ? null : Array.isArray(v) ? v.join(', ') : String(v); } },
          body: all,
          text: () => all.toString('utf8'),
        });
      });
    });
    // the response deadline starts once the request is both connected and sent (an upload is not an answer)
    let connected = false;
    let sent = false;
    arm('connect', t.connectMs);
    req.on('socket', (sock) => {
      const up = () => { connected = true; clearTimeout(timer); if (sent) arm('response', t.responseMs); };
      if (sock.connecting) sock.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', up); else up();
    });
    req.on('finish', () => { sent = true; if (connected) arm('response', t.responseMs); });
    req.setTimeout(t.idleMs, () => settle(new StallError('idle', url, t.idleMs)));
    req.on('error', (e) => settle(e));
    req.end(body);
  });
}
