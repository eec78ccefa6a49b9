/**
 * Agent channel benchmark over a unix socket (the host side of QEMU's virtio-serial chardev looks the
 * same to the client): exec round trip, ping, stdout/stdin and put/get throughput, each beside a local
 * baseline doing the same work with node's child_process and fs. Run: node --import tsx bench/agent-channel.ts
 */
import { spawn } from 'node:child_process';
import { createReadStream, createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { AgentClient } from '../src/vm/agent/index.js';
import { buildAgent, startAgent } from '../test/integration/agent/agent-harness.js';
import { measureAgentChannel, median, quantile, timeIt } from './agent-measure.js';

const MiB = 1024 * 1024;
const BYTES = 128 * MiB;

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

const row = (name: string, agent: string, base: string, ratio: string) => console.log(`${name.padEnd(30)} ${agent.padStart(16)} ${base.padStart(16)} ${ratio.padStart(8)}`);
const rate = (ms: number[]) => BYTES / MiB / (median(ms) / 1000);

async function main(): Promise<void> {
  await buildAgent();
  const agent = await startAgent();
  const work = mkdtempSync(path.join(process.env.BENCH_DIR ?? tmpdir(), 'smol-agent-bench-'));
  try {
    const c = await AgentClient.connectUnix(agent.socket, { timeoutMs: 5000 });
    const a = await measureAgentChannel(c, { guestDir: work, bytes: BYTES });
    c.close();

    const spawnT = await timeIt(200, () => localSpawn(['true']));
    const outBase = await timeIt(5, () => localSpawn(['dd', 'if=/dev/zero', 'bs=1048576', `count=${BYTES / MiB}`]));
    const input = Buffer.alloc(BYTES, 0x61);
    const inBase = await timeIt(5, () => localSpawn(['sh', '-c', 'cat > /dev/null'], input));
    const src = path.join(work, 'src.bin');
    writeFileSync(src, input);
    const copy = await timeIt(5, () => pipeline(createReadStream(src, { highWaterMark: 256 * 1024 }), createWriteStream(path.join(work, 'copy.bin'))));

    row('measure (median)', 'agent', 'local baseline', 'ratio');
    row('exec `true` round trip ms', a.execTrueMs.p50.toFixed(2), median(spawnT).toFixed(2), (a.execTrueMs.p50 / median(spawnT)).toFixed(2));
    row('  p99 ms', a.execTrueMs.p99.toFixed(2), quantile(spawnT, 0.99).toFixed(2), '');
    row('ping ms p50 / p99', `${a.pingMs.p50.toFixed(3)} / ${a.pingMs.p99.toFixed(3)}`, '-', '');
    row('stdout guest->host MiB/s', a.stdoutMiBps.toFixed(0), rate(outBase).toFixed(0), (a.stdoutMiBps / rate(outBase)).toFixed(2));
    row('stdin host->guest MiB/s', a.stdinMiBps.toFixed(0), rate(inBase).toFixed(0), (a.stdinMiBps / rate(inBase)).toFixed(2));
    row('put MiB/s', a.putMiBps.toFixed(0), rate(copy).toFixed(0), (a.putMiBps / rate(copy)).toFixed(2));
    row('get MiB/s', a.getMiBps.toFixed(0), rate(copy).toFixed(0), (a.getMiBps / rate(copy)).toFixed(2));
  } finally {
    await agent.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
