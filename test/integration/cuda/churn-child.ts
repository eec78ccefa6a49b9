/**
 * Child process of stress.test.ts: daemons (compiled, in this process) stopped at points spread over
 * session churn, then a process.exit() while busy sessions are inside the driver. Worker threads stopped
 * from outside inside a koffi call abort the whole process ("FATAL ERROR: Error::ThrowAsJavaScriptException
 * napi_throw"), so the parent asserts this process exits 0. Args: ROUNDS SEED.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { OP, PROTOCOL, encodeFrame } from '../../../src/cuda/protocol/index.js';
import { fakeLibcuda, Raw, root } from './helpers.js';

// dist, not src: workers spawned from source each register tsx, which would make this minutes long.
const daemonModule = pathToFileURL(path.join(root, 'dist/cuda/daemon/index.js')).href;
const { startGpuDaemon } = await import(daemonModule) as typeof import('../../../src/cuda/daemon/index.js');

const rounds = Number(process.argv[2] ?? 8);
let x = Number(process.argv[3] ?? 1);
const rnd = (n: number) => (x = (x * 1103515245 + 12345) >>> 0) % n;
const STOP_BOUND_MS = 6000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-churn-'));

/** A client that drops its connection at a random point of a short session. */
async function dropper(endpoint: string): Promise<void> {
  const c = new Raw(endpoint);
  const point = rnd(4);
  if (point >= 1) await c.hello();
  if (point >= 2) await c.withMemory(1 << 16).catch(() => undefined);
  if (point === 3) c.send(encodeFrame(OP.MemcpyHtoD, [0, 0, 0], { flags: PROTOCOL.flags.async, blob: Buffer.alloc(4096) }).subarray(0, 30));
  await sleep(rnd(200));
  c.sock.destroy();
}

/** Keeps its session worker inside the driver most of the time: batches of allocations and frees. */
async function busy(endpoint: string, until: () => boolean): Promise<void> {
  const c = new Raw(endpoint);
  await c.withMemory(1 << 20);
  while (!until()) {
    const frames: Buffer[] = [];
    for (let i = 0; i < 50; i++) frames.push(encodeFrame(OP.MemGetInfo, [], { seq: ++c.seq }));
    c.send(Buffer.concat(frames));
    for (let i = 0; i < 50; i++) if (!(await c.reply(5000))) return;
  }
}

/**
 * One daemon: a client connects and drops, and the daemon is closed `stopAt` ms after they start. Each
 * new session spawns the next spare worker, so a stop in the right few tens of ms finds a spare still
 * binding the driver: where the old close() terminate()d it and the process aborted.
 */
async function stopDuringChurn(name: string, stopAt: number): Promise<string> {
  const d = await startGpuDaemon({ listen: `unix:${path.join(dir, `${name}.sock`)}`, libcuda: fakeLibcuda });
  const clients = [dropper(d.endpoint).catch(() => undefined)];
  await sleep(stopAt);
  const rep = await d.close();
  await Promise.all(clients);
  const line = `${name}: stop at ${stopAt} ms took ${Math.round(rep.stopMs)} ms, ended ${rep.sessions.length} session(s)`;
  // A stop waits only for workers to end themselves (a second or two if one is still starting, under
  // load); the old close() always ran into its 8 s timeout before it terminate()d the acceptor.
  if (!(rep.stopMs < STOP_BOUND_MS)) { process.stdout.write(`${line}: over ${STOP_BOUND_MS} ms\n`); process.exit(1); }
  return line;
}

// The stops are spread over the time a new spare takes to start and bind the driver (150-650 ms after the
// connection here, later on a busier machine), so that some stop lands inside that window.
for (let r = 0; r < rounds; r++) {
  process.stdout.write(await stopDuringChurn(`r${r}`, 150 + Math.round((500 * (r + rnd(100) / 100)) / rounds)) + '\n');
}

// The process ends with the daemon open and busy sessions in the driver: process.exit() stops every
// worker thread, which is what must not abort.
const d = await startGpuDaemon({ listen: `unix:${path.join(dir, 'exit.sock')}`, libcuda: fakeLibcuda });
let exiting = false;
for (let i = 0; i < 3; i++) void busy(d.endpoint, () => exiting).catch(() => undefined);
await sleep(300 + rnd(300));
exiting = true;
fs.rmSync(dir, { recursive: true, force: true });
process.stdout.write('exiting with the daemon open\n');
process.exit(0);
