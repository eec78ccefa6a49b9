/**
 * One GET whose body goes straight from the socket into a callback: a plain net/tls socket reading into
 * one reused buffer (`onread`), a minimal HTTP/1.1 response reader (status line, headers, Content-Length,
 * chunked or close-delimited bodies). bench:image measured node:http at ~0.5 s of CPU per 100 MiB
 * (llhttp plus a fresh 64 KiB Buffer per read, and the GC behind them), fetch about twice that; this path
 * ~0.15 s including SHA-256 and the file writes, on par with curl's wall time. Everything that is not a
 * blob body (manifests, tokens, uploads) still goes through node:http (http-request.ts).
 */
import net from 'node:net';
import tls from 'node:tls';
import { DEFAULT_TIMEOUTS, StallError, type Timeouts } from './timeouts.js';

const READ_BUFFER = 1 << 20;
const MAX_HEAD = 64 << 10;
const SMALL_BODY = 4 << 10;

export interface BlobResponse {
  status: number;
  headers: Record<string, string>;
  /** The first bytes of a non-200 body (for error messages); empty for a 200. */
  text: string;
  /** Body bytes handed to `onBody` (200 only). */
  bytes: number;
}

export interface GetOptions {
  headers: Record<string, string>;
  tls?: tls.ConnectionOptions;
  /** Called with each piece of a 200 body; the buffer is reused after it returns. Throwing aborts the GET. */
  onBody: (chunk: Buffer) => void;
  /** Connect, headers and idle deadlines (timeouts.ts); a blob body has no overall one, only idle. */
  timeouts?: Timeouts;
}

/** Why a GET broke off mid-response (connection reset, idle, closed early): retrying may work. */
export class TransferError extends Error {}

export function getBlob(url: URL, o: GetOptions): Promise<BlobResponse> {
  return new Promise((resolve, reject) => {
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const onread = { buffer: Buffer.allocUnsafe(READ_BUFFER), callback: (n: number, buf: Buffer) => { feed(buf.subarray(0, n)); return true; } };
    const sock: net.Socket = url.protocol === 'https:'
      ? tls.connect({ ...o.tls, host, port, servername: net.isIP(host) ? undefined : host, onread } as tls.ConnectionOptions)
      : net.connect({ host, port, onread });
    const t = o.timeouts ?? DEFAULT_TIMEOUTS;
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (err: Error | null, r?: BlobResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err); else resolve(r!);
    };
    const arm = (phase: 'connect' | 'response', ms: number) => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(new StallError(phase, url, ms)), ms);
    };
    arm('connect', t.connectMs);
    sock.setTimeout(t.idleMs, () => finish(new StallError('idle', url, t.idleMs, res ? ` after ${res.bytes} body bytes` : '')));
    sock.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      arm('response', t.responseMs); // cleared once the head is in: a body has only the idle deadline
      const lines = [`GET ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`, 'User-Agent: smol', 'Accept-Encoding: identity', 'Connection: close'];
      for (const [k, v] of Object.entries(o.headers)) lines.push(`${k}: ${v}`);
      sock.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    sock.on('error', (e) => finish(e));
    sock.on('close', () => finish(new TransferError(`${url.host} closed the connection${res ? ` after ${res.bytes} body bytes` : ' before a response'}`)));
    sock.on('end', () => {
      if (res && remaining < 0 && !chunked) return finish(null, res); // close-delimited body
      finish(new TransferError(res ? `${url.host} closed the connection after ${res.bytes} body bytes` : `${url.host} closed the connection before a response`));
    });

    let head: Buffer | null = Buffer.alloc(0);
    let res: BlobResponse | undefined;
    let remaining = -1; // body bytes still due (Content-Length or the current chunk); -1: until EOF
    let chunked = false;
    let chunkState: 'size' | 'data' | 'crlf' | 'trailer' = 'size';
    let line = '';
    const deliver = (b: Buffer) => {
      if (!res || b.length === 0) return;
      if (res.status !== 200) {
        if (res.text.length < SMALL_BODY) res.text += b.toString('utf8', 0, Math.min(b.length, SMALL_BODY));
        return;
      }
      res.bytes += b.length;
      o.onBody(b);
    };
    const done = () => finish(null, res);

    function feed(data: Buffer): void {
      if (settled) return;
      try {
        if (head) {
          head = Buffer.concat([head, data]);
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) {
            if (head.length > MAX_HEAD) throw new TransferError(`${url.host} sent a response head over ${MAX_HEAD} bytes`);
            return;
          }
          res = parseHead(head.subarray(0, end).toString('latin1'), url);
          clearTimeout(timer);
          data = head.subarray(end + 4);
          head = null;
          chunked = /\bchunked\b/i.test(res.headers['transfer-encoding'] ?? '');
          if (!chunked && res.headers['content-length'] !== undefined) remaining = Number(res.headers['content-length']);
          if (res.status === 204 || res.status === 304 || remaining === 0) return done();
        }
        if (!chunked) {
          const take = remaining >= 0 ? data.subarray(0, remaining) : data;
          deliver(take);
          if (remaining >= 0) { remaining -= take.length; if (remaining === 0) return done(); }
          if (res!.status !== 200 && res!.text.length >= SMALL_BODY) return done();
          return;
        }
        while (data.length) {
          if (chunkState === 'data') {
            const take = data.subarray(0, remaining);
            deliver(take);
            remaining -= take.length;
            data = data.subarray(take.length);
            if (remaining === 0) chunkState = 'crlf';
            continue;
          }
          const nl = data.indexOf(0x0a);
          line += data.toString('latin1', 0, nl < 0 ? data.length : nl);
          if (line.length > 4096) throw new TransferError(`${url.host} sent a malformed chunked body`);
          if (nl < 0) return;
          data = data.subarray(nl + 1);
          const l = line.replace(/\r$/, '');
          line = '';
          if (chunkState === 'crlf') { chunkState = 'size'; continue; }
          if (chunkState === 'trailer') { if (l === '') return done(); continue; }
          const size = Number.parseInt(l.split(';')[0].trim(), 16);
          if (!Number.isFinite(size) || size < 0) throw new TransferError(`${url.host} sent a malformed chunk size ${JSON.stringify(l.slice(0, 20))}`);
          if (size === 0) { chunkState = 'trailer'; continue; }
          remaining = size;
          chunkState = 'data';
        }
      } catch (err) {
        finish(err as Error);
      }
    }
  });
}

function parseHead(text: string, url: URL): BlobResponse {
  const [status, ...lines] = text.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(status);
  if (!m) throw new TransferError(`${url.host} did not answer with HTTP/1.x (${JSON.stringify(status.slice(0, 40))})`);
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const c = l.indexOf(':');
    if (c <= 0) continue;
    const k = l.slice(0, c).trim().toLowerCase();
    const v = l.slice(c + 1).trim();
    headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
  }
  return { status: Number(m[1]), headers, text: '', bytes: 0 };
}
