/**
 * Registries that misbehave on purpose, on loopback: a node http(s) server with a handler the test writes
 * (stall, answer half, name a token realm), or a raw TCP server that accepts and never speaks. Each
 * records what it was asked, Authorization headers included, and stop() cuts every open connection.
 */
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

export interface Seen { method: string; url: string; authorization?: string }

export interface HostileServer { host: string; port: number; seen: Seen[]; stop(): Promise<void> }

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse, host: string) => void;

async function listen(server: net.Server, seen: Seen[]): Promise<HostileServer> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    host: `127.0.0.1:${port}`, port, seen,
    stop: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}

/** An HTTP (or, given a certificate, HTTPS) server answering with `handler`. */
export async function startHostile(handler: Handler, o: { tls?: { certFile: string; keyFile: string } } = {}): Promise<HostileServer> {
  const seen: Seen[] = [];
  let host = '';
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization });
    handler(req, res, host);
  };
  const server = o.tls ? https.createServer({ cert: await readFile(o.tls.certFile), key: await readFile(o.tls.keyFile) }, onRequest) : http.createServer(onRequest);
  const s = await listen(server, seen);
  host = s.host;
  return s;
}

/** A TCP server that accepts, reads, and writes `say` (nothing by default), then stays silent forever. */
export async function startSilent(say = ''): Promise<HostileServer> {
  const seen: Seen[] = [];
  const server = net.createServer((sock) => {
    sock.on('data', () => {});
    sock.on('error', () => {});
    if (say) sock.write(say);
  });
  return listen(server, seen);
}
