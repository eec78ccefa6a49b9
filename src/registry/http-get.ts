/**
 * Small registry requests (manifests, tokens, HEAD, uploads) over node:http/https, which take the TLS trust
 * smol computes per registry (built-in fetch cannot without undici's Agent). Blob bodies take the faster
 * path in blob-get.ts. Follows redirects (registries send blobs to storage), dropping Authorization when
 * one leaves the registry's origin.
 */
import http from 'node:http';
import https from 'node:https';
import type tls from 'node:tls';

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
}

const REDIRECTS = [301, 302, 303, 307, 308];

export function httpRequest(url: URL, o: SmallRequest = {}, redirects = 5): Promise<SmallResponse> {
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const body = typeof o.body === 'string' ? Buffer.from(o.body) : o.body;
    const headers: Record<string, string> = { 'user-agent': 'smol', ...o.headers };
    if (body && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-length')) headers['content-length'] = String(body.length);
    const req = mod.request(url, { method: o.method ?? 'GET', headers, ...(url.protocol === 'https:' ? o.tls : {}) }, (res) => {
      const loc = res.headers.location;
      const method = o.method ?? 'GET';
      if (res.statusCode && REDIRECTS.includes(res.statusCode) && loc && redirects > 0 && (method === 'GET' || method === 'HEAD')) {
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
      res.on('error', reject);
      res.on('end', () => {
        const all = Buffer.concat(chunks);
        resolve({
          status: res.statusCode ?? 0,
          headers: { get: (name) => { const v = res.headers[name.toLowerCase()]; return v === undefined ? null : Array.isArray(v) ? v.join(', ') : String(v); } },
          body: all,
          text: () => all.toString('utf8'),
        });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
