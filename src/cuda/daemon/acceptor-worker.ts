/** Worker-thread entry: binds the listening socket (unix, tcp or vsock) and blocks in accept(),
 *  handing each connection's fd to the main thread. Ends when the main thread shuts the socket down. */
import { parentPort, workerData } from 'node:worker_threads';
import { sys, sockaddr } from './driver/sys.js';
import type { Endpoint } from '../protocol/index.js';

const { endpoint } = workerData as { endpoint: Endpoint };
const io = sys();
let fd = -1;
try {
  const { family, addr } = sockaddr(endpoint);
  fd = io.socket(family);
  io.bindListen(fd, addr, 128);
} catch (err) {
  if (fd >= 0) io.close(fd);
  parentPort!.postMessage({ type: 'error', message: (err as Error).message });
  process.exit(0);
}
parentPort!.postMessage({ type: 'listening', fd });
for (;;) {
  const c = io.accept(fd);
  if (c < 0) break;
  if (endpoint.kind === 'tcp') io.setNoDelay(c);
  parentPort!.postMessage({ type: 'conn', fd: c });
}
io.close(fd);
parentPort!.postMessage({ type: 'stopped' });
