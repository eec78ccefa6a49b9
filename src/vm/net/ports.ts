/** Published ports: is each host port free before anything starts? */
import dgram from 'node:dgram';
import net from 'node:net';
import { ConflictError, ValidationError } from '../../errors/index.js';
import { formatPort, type PortMapping } from '../../smolfile/network.js';

/**
 * Binds each host address:port the way the forwarder will, then lets go. A port another process holds (or
 * one listed twice) fails here, naming it, before a machine is created or its QEMU started. The window
 * between this check and QEMU's own bind is small; QEMU failing there is reported the same way.
 */
export async function checkPortsFree(ports: readonly PortMapping[], where?: string): Promise<void> {
  const held: Array<() => Promise<void>> = [];
  try {
    for (const p of ports) held.push(await hold(p, where));
  } finally {
    await Promise.all(held.map((close) => close()));
  }
}

function hold(p: PortMapping, where?: string): Promise<() => Promise<void>> {
  const fail = (err: NodeJS.ErrnoException) => {
    if (err.code === 'EADDRINUSE') {
      return new ConflictError(`host port ${p.host}/${p.protocol} on ${p.address} is already in use (publishing ${formatPort(p)})`, {
        where, hint: `Pick another host port (-p OTHER:${p.guest}), or stop what listens there (ss -lntup 'sport = :${p.host}').`,
      });
    }
    if (err.code === 'EADDRNOTAVAIL') {
      return new ValidationError(`cannot publish on ${p.address}: no interface of this host has that address`, [{ path: '--publish', message: formatPort(p) }]);
    }
    if (err.code === 'EACCES') {
      return new ConflictError(`host port ${p.host} needs privileges to bind (ports below 1024 are reserved to root)`, { where, hint: 'Use a host port of 1024 or more.' });
    }
    return err;
  };
  return new Promise((resolve, reject) => {
    if (p.protocol === 'udp') {
      const s = dgram.createSocket('udp4');
      s.once('error', (e) => { s.close(); reject(fail(e)); });
      s.bind({ port: p.host, address: p.address, exclusive: true }, () => resolve(() => new Promise((r) => s.close(() => r()))));
      return;
    }
    const srv = net.createServer();
    srv.once('error', (e) => reject(fail(e)));
    srv.listen({ port: p.host, host: p.address, exclusive: true }, () => resolve(() => new Promise((r) => srv.close(() => r()))));
  });
}
