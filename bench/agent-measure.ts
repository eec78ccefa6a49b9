/**
 * Channel measurements over any connected AgentClient: a host test agent (bench/agent-channel.ts) or a
 * real VM's virtio-serial port (for bench/vm.ts). All work happens in the guest; files go under guestDir.
 */
import { Readable } from 'node:stream';
import type { AgentClient } from '../src/vm/agent/index.js';
import { median, percentile, timeRuns } from './stats.js';

const MiB = 1024 * 1024;

export interface AgentChannelResult {
  execTrueMs: { p50: number; p99: number };
  pingMs: { p50: number; p99: number };
  stdoutMiBps: number;
  stdinMiBps: number;
  putMiBps: number;
  getMiBps: number;
}

export interface MeasureOptions {
  guestDir: string;
  execRuns?: number;
  pings?: number;
  /** Bytes streamed per throughput run (default 256 MiB; use less under TCG). */
  bytes?: number;
  repeats?: number;
}

// one definition of percentiles and timing loops for every benchmark (bench/stats.ts)
export const quantile = (xs: number[], q: number): number => percentile(xs, q * 100);
export { median };
export const timeIt = timeRuns;

async function drain(r: Readable): Promise<number> {
  let n = 0;
  for await (const c of r) n += (c as Buffer).length;
  return n;
}

export async function measureAgentChannel(c: AgentClient, o: MeasureOptions): Promise<AgentChannelResult> {
  const bytes = o.bytes ?? 256 * MiB;
  const repeats = o.repeats ?? 5;
  const rate = (ms: number[]) => bytes / MiB / (median(ms) / 1000);
  await timeIt(10, () => c.run({ argv: ['true'] }));
  const exec = await timeIt(o.execRuns ?? 200, () => c.run({ argv: ['true'] }));
  const pings: number[] = [];
  for (let i = 0; i < (o.pings ?? 1000); i++) pings.push(await c.ping());

  // dd writes 1 MiB blocks, so the producer is not the bottleneck (busybox head is, under TCG).
  const count = Math.ceil(bytes / MiB);
  const out = await timeIt(repeats, async () => {
    const s = c.exec({ argv: ['dd', 'if=/dev/zero', 'bs=1048576', `count=${count}`], env: { LC_ALL: 'C' } });
    s.stderr.resume();
    if ((await drain(s.stdout)) !== count * MiB) throw new Error('short stdout');
    await s.exit;
  });
  const input = Buffer.alloc(count * MiB, 0x61);
  const inp = await timeIt(repeats, async () => {
    const r = await c.run({ argv: ['sh', '-c', 'cat > /dev/null'], stdin: input });
    if (r.code !== 0) throw new Error('cat failed');
  });
  const file = `${o.guestDir}/smol-agent-bench.bin`;
  const put = await timeIt(repeats, () => c.putFile(Readable.from([input]), file, 0o644));
  const get = await timeIt(repeats, async () => {
    const f = await c.getFile(file);
    if ((await drain(f.stream)) !== input.length) throw new Error('short get');
  });
  await c.run({ argv: ['rm', '-f', file] });
  return {
    execTrueMs: { p50: median(exec), p99: quantile(exec, 0.99) },
    pingMs: { p50: median(pings), p99: quantile(pings, 0.99) },
    stdoutMiBps: rate(out),
    stdinMiBps: rate(inp),
    putMiBps: rate(put),
    getMiBps: rate(get),
  };
}
