/**
 * Blocking socket syscalls through koffi: the daemon binds its listening socket here, and each session
 * process accepts its guest on it and reads frames with blocking calls. Node's `net` has no AF_VSOCK and
 * cannot hand a raw fd to another process, so the daemon does its socket I/O here (DESIGN.md §2, §5).
 */
import { koffiModule } from './cuda.js';

export const AF_UNIX = 1, AF_INET = 2, AF_VSOCK = 40;
const SOCK_STREAM = 1, SOCK_CLOEXEC = 0o2000000, MSG_DONTWAIT = 0x40;

export interface Sys {
  socket(family: number): number;
  bindListen(fd: number, addr: Buffer, backlog: number): void;
  accept(fd: number): number;
  read(fd: number, buf: Buffer, off: number, len: number): number;
  writeAll(fd: number, buf: Buffer, off: number, len: number): boolean;
  /** The address of a buffer whose memory never moves (Buffer.allocUnsafeSlow), for readAt/writeAllAt. */
  addressOf(buf: Buffer): number;
  /** read/writeAll at a raw address: no Buffer view made and none marshalled per call (the frame loop's hot path). */
  readAt(fd: number, addr: number, len: number): number;
  writeAllAt(fd: number, addr: number, len: number): boolean;
  /** recv(MSG_DONTWAIT) at a raw address: bytes read, 0 at end of stream, < 0 when nothing is there yet (or an error, which a blocking read then reports). */
  recvNowAt(fd: number, addr: number, len: number): number;
  close(fd: number): void;
  shutdown(fd: number): void;
  setNoDelay(fd: number): void;
  /** Waits up to `ms` for fd to become readable (or to have a connection to accept). */
  readable(fd: number, ms: number): boolean;
  errno(): number;
}

let cached: Sys | undefined;
export function sys(): Sys {
  if (cached) return cached;
  const koffi = koffiModule();
  const c = koffi.load('libc.so.6');
  const socket = c.func('int socket(int domain, int type, int proto)');
  const bind = c.func('int bind(int fd, const void *addr, uint32_t len)');
  const listen = c.func('int listen(int fd, int backlog)');
  const accept4 = c.func('int accept4(int fd, void *addr, void *len, int flags)');
  const read = c.func('int64_t read(int fd, void *buf, uint64_t n)');
  const write = c.func('int64_t write(int fd, const void *buf, uint64_t n)');
  // The same two calls taking the address as an integer: koffi passes a number straight through, where a
  // Buffer argument costs a subarray view and its type checks on every call.
  const readP = c.func('int64_t read(int fd, uintptr_t buf, uint64_t n)');
  const writeP = c.func('int64_t write(int fd, uintptr_t buf, uint64_t n)');
  const recvP = c.func('int64_t recv(int fd, uintptr_t buf, uint64_t n, int flags)');
  const memmove = c.func('uintptr_t memmove(void *d, const void *s, uint64_t n)');
  const close = c.func('int close(int fd)');
  const shutdown = c.func('int shutdown(int fd, int how)');
  const setsockopt = c.func('int setsockopt(int fd, int level, int name, const void *val, uint32_t len)');
  const poll = c.func('int poll(void *fds, uint64_t n, int timeout)');
  const pfd = Buffer.alloc(8);
  const one = Buffer.alloc(4); one.writeInt32LE(1);
  const EINTR = 4;
  cached = {
    socket(family) {
      const fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0) as number;
      if (fd < 0) throw new Error(`socket failed: errno ${koffi.errno()}`);
      if (family === AF_INET) setsockopt(fd, 1, 2, one, 4); // SO_REUSEADDR
      return fd;
    },
    bindListen(fd, addr, backlog) {
      if ((bind(fd, addr, addr.length) as number) < 0) throw new Error(`bind failed: errno ${koffi.errno()}`);
      if ((listen(fd, backlog) as number) < 0) throw new Error(`listen failed: errno ${koffi.errno()}`);
    },
    accept(fd) {
      for (;;) {
        const r = accept4(fd, null, null, SOCK_CLOEXEC) as number;
        if (r >= 0 || koffi.errno() !== EINTR) return r;
      }
    },
    read(fd, buf, off, len) {
      for (;;) {
        const r = Number(read(fd, buf.subarray(off, off + len), len));
        if (r >= 0 || koffi.errno() !== EINTR) return r;
      }
    },
    writeAll(fd, buf, off, len) {
      while (len > 0) {
        const r = Number(write(fd, buf.subarray(off, off + len), len));
        if (r < 0) { if (koffi.errno() === EINTR) continue; return false; }
        off += r; len -= r;
      }
      return true;
    },
    addressOf: (buf) => Number(memmove(buf, buf, 0)),
    readAt(fd, addr, len) {
      for (;;) {
        const r = Number(readP(fd, addr, len));
        if (r >= 0 || koffi.errno() !== EINTR) return r;
      }
    },
    writeAllAt(fd, addr, len) {
      while (len > 0) {
        const r = Number(writeP(fd, addr, len));
        if (r < 0) { if (koffi.errno() === EINTR) continue; return false; }
        addr += r; len -= r;
      }
      return true;
    },
    recvNowAt: (fd, addr, len) => Number(recvP(fd, addr, len, MSG_DONTWAIT)),
    close(fd) { close(fd); },
    shutdown(fd) { shutdown(fd, 2); },
    setNoDelay(fd) { setsockopt(fd, 6, 1, one, 4); },
    readable(fd, ms) {
      pfd.writeInt32LE(fd, 0); pfd.writeInt16LE(1, 4); pfd.writeInt16LE(0, 6); // POLLIN
      return (poll(pfd, 1, ms) as number) > 0;
    },
    errno: () => koffi.errno(),
  };
  return cached;
}

/** sockaddr bytes for an endpoint; TCP takes IPv4 literals (and "localhost"). */
export function sockaddr(ep: { kind: 'unix'; path: string } | { kind: 'tcp'; host: string; port: number } | { kind: 'vsock'; cid: number; port: number }): { family: number; addr: Buffer } {
  if (ep.kind === 'unix') {
    const b = Buffer.alloc(110);
    b.writeUInt16LE(AF_UNIX, 0);
    if (Buffer.byteLength(ep.path) > 107) throw new Error(`unix socket path too long: ${ep.path}`);
    b.write(ep.path, 2);
    return { family: AF_UNIX, addr: b };
  }
  if (ep.kind === 'tcp') {
    const host = ep.host === 'localhost' ? '127.0.0.1' : ep.host;
    const parts = host.split('.').map(Number);
    if (parts.length !== 4 || parts.some((p) => !(p >= 0 && p <= 255))) throw new Error(`tcp host must be an IPv4 address: ${ep.host}`);
    const b = Buffer.alloc(16);
    b.writeUInt16LE(AF_INET, 0); b.writeUInt16BE(ep.port, 2);
    parts.forEach((p, i) => b.writeUInt8(p, 4 + i));
    return { family: AF_INET, addr: b };
  }
  const b = Buffer.alloc(16);
  b.writeUInt16LE(AF_VSOCK, 0); b.writeUInt32LE(ep.port, 4); b.writeUInt32LE(ep.cid >>> 0, 8);
  return { family: AF_VSOCK, addr: b };
}
