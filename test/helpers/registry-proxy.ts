/**
 * A pass-through HTTP proxy in front of the test registry, for what a correct registry never does: serve
 * a manifest that is not JSON, or trickle a blob slowly enough that a pull can be killed halfway.
 */
import http from 'node:http';
import net from 'node:net';

export interface RegistryProxy { host: string; stop(): Promise<void> }

export interface ProxyOptions {
  /** path → body served with status 200 instead of the registry's answer. */
  override?: Map<string, { body: Buffer; contentType: string }>;
  /** Blob responses are sent in 64 KiB pieces with this delay between them. */
  blobDelayMs?: number;
}

export async function startProxy(upstream: string, o: ProxyOptions = {}): Promise<RegistryProxy> {
  const server = http.createServer((req, res) => {
    void (async () => {
      const p = new URL(req.url ?? '/', 'http://x').pathname;
      const fake = o.override?.get(p);
      if (fake) {
        res.writeHead(200, { 'content-type': fake.contentType, 'content-length': String(fake.body.length) });
        return res.end(req.method === 'HEAD' ? undefined : fake.body);
      }
      const chunks: Buffer[] = [];
      for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k)).map(([k, v]) => [k, String(v)]));
      const up = await fetch(`http://${upstream}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined, redirect: 'manual' });
      const out: Record<string, string> = {};
      up.headers.forEach((v, k) => { if (k !== 'content-encoding' && k !== 'transfer-encoding') out[k] = v; });
      res.writeHead(up.status, out);
      const body = Buffer.from(await up.arrayBuffer());
      if (o.blobDelayMs && /\/blobs\/sha256:/.test(p) && req.method === 'GET') {
        for (let off = 0; off < body.length && !res.destroyed; off += 64 << 10) {
          res.write(body.subarray(off, off + (64 << 10)));
          await new Promise((r) => setTimeout(r, o.blobDelayMs));
        }
        return res.end();
      }
      res.end(body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return { host: `127.0.0.1:${port}`, stop: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}
