import type { Command } from 'commander';
import { z } from 'zod';
import { throughput, type Throughput } from '../../../ledger/throughput.js';
import type { LedgerStats } from '../../../ledger/types.js';
import { formatDuration } from '../../output.js';
import { ledgerOption, withLedger } from '../ledger/open.js';

export const statsSchema = z.strictObject({
  ledger: z.string().optional(), json: z.boolean().optional(), watch: z.boolean().optional(),
  interval: z.coerce.number().positive().default(2), rollout: z.string().optional(),
});

function render(s: LedgerStats & Throughput): string {
  const f = (n: number, d = 1) => n.toFixed(d);
  const dur = (n: number | null) => (n === null ? '-' : formatDuration(n));
  return [
    `queue      ${s.queueDepth} queued, ${s.leased} leased, ${s.done} done, ${s.dead} dead, ${s.canceled} canceled`,
    `queue age  p50 ${formatDuration(s.queueAgeP50Ms)}, p99 ${formatDuration(s.queueAgeP99Ms)}`,
    `attempts   ${s.attempts} over ${s.itemsAttempted} items, retry rate ${f(s.retryRate * 100)}%, ${s.attemptsPerMin === null ? '-' : f(s.attemptsPerMin)}/min over ${formatDuration(s.spanMs)}`,
    ...s.stages.map((t) => `stage      ${t.stage} (${t.kind}): ${t.attempts} attempts, ${t.done} done, ${t.failed} failed; time p50 ${dur(t.p50Ms)}, p95 ${dur(t.p95Ms)}`),
    `leases     ${s.leaseExpiries} expired, ${s.staleRejections} stale tokens rejected, ${s.infraFailures} given back on infrastructure failures`,
    `results    ${s.results} total, ${f(s.resultsPerSec)}/s (last 10 s)`,
    `trajectories ${s.trajectories}, ${s.trajectoriesPerGpuHour === null ? '-' : f(s.trajectoriesPerGpuHour, 0)} per GPU-hour`,
    `inference  ${s.inference.requests} requests, ${s.inference.done} done, ${s.inference.shed} shed, mean batch ${s.inference.meanBatchSize === null ? '-' : f(s.inference.meanBatchSize)}`,
  ].join('\n') + '\n';
}

export function register(parent: Command): void {
  ledgerOption(parent.command('stats')
    .description('queue depth and age, attempts/min, retry rate, p50/p95 time per stage, lease expiries, stale rejections, infrastructure failures, results/s, trajectories per GPU-hour')
    .option('--rollout <id>', 'only this rollout')
    .option('--watch', 'refresh until interrupted')
    .option('--interval <seconds>', 'refresh interval for --watch', '2')
    .option('--json', 'print as JSON (one object per refresh with --watch)'))
    .action(async (raw: unknown) => {
      const opts = statsSchema.parse(raw);
      await withLedger(opts.ledger, async (l) => {
        for (;;) {
          const st = await l.ledger.stats(opts.rollout);
          const s = { ...st, ...throughput(await l.ledger.attemptTimings(opts.rollout), st.now) };
          if (opts.json) process.stdout.write(JSON.stringify(s) + (opts.watch ? '\n' : ''));
          else process.stdout.write((opts.watch && process.stdout.isTTY ? '\x1b[2J\x1b[H' : '') + render(s));
          if (!opts.watch) break;
          await new Promise((r) => setTimeout(r, opts.interval * 1000));
        }
        if (opts.json && !opts.watch) process.stdout.write('\n');
      });
    });
}
