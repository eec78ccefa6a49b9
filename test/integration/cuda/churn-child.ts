/**
 * Child process of stress.test.ts: daemons (compiled, in this process) stopped at random points of
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

for (let r = 0; r < rounds; r++) {
  const d = await startGpuDaemon({ listen: `unix:${path.join(dir, `r${r}.sock`)}`, libcuda: fakeLibcuda });
  const clients = Array.from({ length: 4 }, () => dropper(d.endpoint).catch(() => undefined));
  // Stop somewhere between "before any session" and "after all of them": each new session starts a
  // spare worker, so a stop often finds one binding the driver.
  await sleep(rnd(400));
  const rep = await d.close();
  await Promise.all(clients);
  process.stdout.write(`round ${r}: stopped in ${Math.round(rep.stopMs)} ms, ended ${rep.sessions.length} session(s)\n`);
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
