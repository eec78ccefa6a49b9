/**
 * Agent channel benchmark over a unix socket (the host side of QEMU's virtio-serial chardev looks the
 * same to the client): exec round trip, ping, stdout/stdin throughput, put/get throughput.
 * Baselines run the same work with node's child_process / fs locally. Run: node --import tsx bench/agent-channel.ts
 */
import { spawn } from 'node:child_process';
import { createReadStream, createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AgentClient } from '../src/vm/agent/index.js';
import { buildAgent, startAgent } from '../test/integration/agent/agent-harness.js';

const MiB = 1024 * 1024;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
const median = (xs: number[]) => quantile(xs, 0.5);

async function timeIt(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out;
}

async function drain(r: Readable): Promise<number> {
  let n = 0;
  for await (const c of r) n += (c as Buffer).length;
  return n;
}

function localSpawn(argv: string[], input?: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const p = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'ignore'] });
    let n = 0;
    p.stdout.on('data', (c: Buffer) => (n += c.length));
    p.on('error', reject);
    p.on('close', () => resolve(n));
    p.stdin.end(input);
  });
}

const row = (name: string, agent: string, base: string, ratio: string) => console.log(`${name.padEnd(28)} ${agent.padStart(16)} ${base.padStart(16)} ${ratio.padStart(8)}`);

async function main(): Promise<void> {
  await buildAgent();
  const agent = await startAgent();
  const work = mkdtempSync(path.join(process.env.BENCH_DIR ?? tmpdir(), 'smol-agent-bench-'));
  try {
    const c = await AgentClient.connectUnix(agent.socket, { timeoutMs: 5000 });
    row('measure', 'agent (median)', 'local baseline', 'ratio');

    await timeIt(20, () => c.run({ argv: ['true'] })); // warm-up
    const execT = await timeIt(300, () => c.run({ argv: ['true'] }));
    const spawnT = await timeIt(300, () => localSpawn(['true']));
    row('exec `true` round trip ms', median(execT).toFixed(2), median(spawnT).toFixed(2), (median(execT) / median(spawnT)).toFixed(2));
    row('  p99 ms', quantile(execT, 0.99).toFixed(2), quantile(spawnT, 0.99).toFixed(2), '');

    const pings: number[] = [];
    for (let i = 0; i < 1000; i++) pings.push(await c.ping());
    row('ping ms (p50 / p99)', `${median(pings).toFixed(3)} / ${quantile(pings, 0.99).toFixed(3)}`, '-', '');

    const size = 256 * MiB;
    const out = await timeIt(5, async () => {
      const s = c.exec({ argv: ['head', '-c', String(size), '/dev/zero'] });
      if ((await drain(s.stdout)) !== size) throw new Error('short stdout');
      await s.exit;
    });
    const outBase = await timeIt(5, () => localSpawn(['head', '-c', String(size), '/dev/zero']));
    const mbps = (ms: number[], bytes: number) => (bytes / MiB / (median(ms) / 1000)).toFixed(0);
    row('stdout guest->host MiB/s', mbps(out, size), mbps(outBase, size), (median(outBase) / median(out)).toFixed(2));

    const input = Buffer.alloc(128 * MiB, 0x61);
    const inT = await timeIt(5, async () => {
      const r = await c.run({ argv: ['sh', '-c', 'cat > /dev/null'], stdin: input });
      if (r.code !== 0) throw new Error('cat failed');
    });
    const inBase = await timeIt(5, () => localSpawn(['sh', '-c', 'cat > /dev/null'], input));
    row('stdin host->guest MiB/s', mbps(inT, input.length), mbps(inBase, input.length), (median(inBase) / median(inT)).toFixed(2));

    const src = path.join(work, 'src.bin');
    writeFileSync(src, input);
    const putT = await timeIt(5, () => c.putFile(src, path.join(work, 'put.bin'), 0o644));
    const copyT = await timeIt(5, () => pipeline(createReadStream(src, { highWaterMark: 256 * 1024 }), createWriteStream(path.join(work, 'copy.bin'))));
    row('put MiB/s', mbps(putT, input.length), mbps(copyT, input.length), (median(copyT) / median(putT)).toFixed(2));
    const getT = await timeIt(5, async () => {
      const f = await c.getFile(src);
      await pipeline(f.stream, createWriteStream(path.join(work, 'get.bin')));
    });
    row('get MiB/s', mbps(getT, input.length), mbps(copyT, input.length), (median(copyT) / median(getT)).toFixed(2));
    c.close();
  } finally {
    await agent.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
