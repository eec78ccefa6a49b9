/**
 * The registry readers: the hand-written HTTP/1.1 response reader of blob downloads (blob-get.ts) and
 * the small-request path (http-get.ts), each fed a registry's raw response bytes from a loopback server
 * that writes them and then closes. Inputs are generated responses (status lines, duplicate and lying
 * Content-Length, chunked framing with odd sizes, extensions and trailers) and byte mutations of them.
 * Properties: only TransferError or a socket/parser error (an Error with a `code`) escapes; every GET
 * settles soon after the server closes; a 200 body never delivers more bytes than the server sent, nor
 * more than a valid Content-Length announced.
 */
import net from 'node:net';
import fc from 'fast-check';
import { getBlob, TransferError } from '../../../src/registry/blob-get.js';
import { httpRequest } from '../../../src/registry/http-get.js';
import { mutated } from '../lib/mutate.js';
import { FuzzFailure, expectOnly, type FuzzTarget } from '../lib/target.js';

let server: net.Server | undefined;
let port = 0;
let response: Buffer = Buffer.alloc(0);

async function listen(): Promise<void> {
  server = net.createServer((s) => {
    s.on('error', () => undefined);
    // Answer once the request head arrived, as a registry would; redirects come back here.
    s.once('data', () => s.end(response.length && /^location:/im.test(response.toString('latin1')) ? sameHost(response) : response));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  port = (server!.address() as net.AddressInfo).port;
}

/** Redirects stay on this server: the fuzz must not reach out to whatever host the bytes name. */
function sameHost(b: Buffer): Buffer {
  return Buffer.from(b.toString('latin1').replace(/^(location:)[^\r\n]*/gim, '$1 /redirected'), 'latin1');
}

const chunked = fc.array(fc.tuple(fc.uint8Array({ maxLength: 64 }), fc.constantFrom('', ';ext=1', ' ', '\t'), fc.constantFrom(0, 0, 1, -1)), { maxLength: 5 })
  .map((cs) => Buffer.concat([...cs.map(([d, ext, lie]) => Buffer.concat([Buffer.from(`${(d.length + lie).toString(16)}${ext}\r\n`), Buffer.from(d), Buffer.from('\r\n')])), Buffer.from('0\r\nx-trailer: 1\r\n\r\n')]));
const response200 = fc.record({
  status: fc.constantFrom('HTTP/1.1 200 OK', 'HTTP/1.0 200 OK', 'HTTP/1.1 404 Not Found', 'HTTP/1.1 307 Temporary Redirect', 'HTTP/1.1 204 No Content', 'HTTP/2 200', 'HTTP/1.1 2000', 'garbage'),
  length: fc.option(fc.constantFrom('0', '5', '100', '-1', 'abc', '1e3', '9007199254740993', '5, 6', ' 5'), { nil: undefined }),
  te: fc.option(fc.constantFrom('chunked', 'gzip, chunked', 'identity', 'CHUNKED'), { nil: undefined }),
  extra: fc.constantFrom('', 'Location: http://127.0.0.1:1/x\r\n', 'Content-Length: 3\r\n', 'X: y\r\n', ': bad\r\n'),
  body: fc.oneof(fc.uint8Array({ maxLength: 200 }).map((u) => Buffer.from(u)), chunked),
}).map((r) => Buffer.concat([
  Buffer.from(`${r.status}\r\n${r.length !== undefined ? `Content-Length: ${r.length}\r\n` : ''}${r.te ? `Transfer-Encoding: ${r.te}\r\n` : ''}${r.extra}\r\n`, 'latin1'), r.body,
]));

/** A body's Content-Length when it is one plain decimal number. */
function declared(input: Buffer): number | undefined {
  const head = input.toString('latin1').split('\r\n\r\n')[0];
  const all = [...head.matchAll(/^content-length:\s*(.*?)\s*$/gim)].map((m) => m[1]);
  return all.length === 1 && /^\d+$/.test(all[0]) && !/transfer-encoding/i.test(head) ? Number(all[0]) : undefined;
}

const setup = async () => { await listen(); };
const teardown = async () => { await new Promise((r) => server?.close(r)); server = undefined; };
const socketError = (err: unknown) => err instanceof Error && typeof (err as NodeJS.ErrnoException).code === 'string';

export const blobGet: FuzzTarget = {
  name: 'blob-get',
  setup, teardown,
  arbitrary: (seeds) => fc.oneof(response200, mutated(seeds, { maxLength: 1 << 16 })),
  async run(input) {
    response = input;
    let delivered = 0;
    try {
      const r = await getBlob(new URL(`http://127.0.0.1:${port}/v2/x/blobs/sha256:0`), { headers: {}, onBody: (c) => { delivered += c.length; } });
      if (delivered > input.length) throw new FuzzFailure(`delivered ${delivered} body bytes from a ${input.length}-byte response`);
      const cl = declared(input);
      if (r.status === 200 && cl !== undefined && delivered > cl) throw new FuzzFailure(`delivered ${delivered} body bytes past Content-Length ${cl}`);
    } catch (err) {
      if (err instanceof FuzzFailure || !(err instanceof TransferError || socketError(err))) expectOnly(err, [TransferError], 'getBlob');
    }
  },
};

export const httpGet: FuzzTarget = {
  name: 'http-get',
  setup, teardown,
  arbitrary: (seeds) => fc.oneof(response200, mutated(seeds, { maxLength: 1 << 16 })),
  async run(input) {
    response = input;
    try {
      const r = await httpRequest(new URL(`http://127.0.0.1:${port}/v2/`), { maxBytes: 1024 });
      if (r.body.length > Math.max(1024, 0) + 65536) throw new FuzzFailure(`kept ${r.body.length} body bytes with maxBytes 1024`);
    } catch (err) {
      if (err instanceof FuzzFailure || !socketError(err)) expectOnly(err, [], 'httpRequest');
    }
  },
};
