import type { Command } from 'commander';
import { z } from 'zod';
import { GatewayService } from '../../rollout/gateway/service.js';
import { parseListen, startGatewayServer } from '../../rollout/gateway/server.js';
import { OpenAiCompletionsUpstream } from '../../rollout/gateway/upstream.js';
import { GATEWAY_BATCH_WINDOW_MS, GATEWAY_MAX_BATCH, GATEWAY_MAX_OUTSTANDING, GATEWAY_MAX_PER_ROLLOUT } from '../../rollout/limits.js';
import { ledgerOption, withLedger } from './ledger/open.js';

export const gatewaySchema = z.strictObject({
  ledger: z.string().optional(),
  listen: z.string().default('127.0.0.1:8470'),
  upstream: z.url(),
  envVersion: z.string().optional(),
  maxOutstanding: z.coerce.number().int().positive().default(GATEWAY_MAX_OUTSTANDING),
  maxPerRollout: z.coerce.number().int().positive().default(GATEWAY_MAX_PER_ROLLOUT),
  maxBatch: z.coerce.number().int().positive().default(GATEWAY_MAX_BATCH),
  batchWindow: z.coerce.number().int().min(0).default(GATEWAY_BATCH_WINDOW_MS),
  json: z.boolean().optional(),
});

export function register(program: Command): void {
  ledgerOption(program.command('gateway')
    .description('serve the GPU inference gateway: batching, admission control (429 + Retry-After), idempotent durable results')
    .option('--listen <addr>', 'HOST:PORT to listen on (port 0 picks one)', '127.0.0.1:8470')
    .requiredOption('--upstream <url>', 'OpenAI-compatible completions server (vLLM, llama.cpp server)')
    .option('--env-version <v>', 'environment version recorded with every result (default: the upstream URL)')
    .option('--max-outstanding <n>', 'cap on admitted, unanswered requests overall', String(GATEWAY_MAX_OUTSTANDING))
    .option('--max-per-rollout <n>', 'cap on outstanding requests per rollout', String(GATEWAY_MAX_PER_ROLLOUT))
    .option('--max-batch <n>', 'largest batch sent upstream', String(GATEWAY_MAX_BATCH))
    .option('--batch-window <ms>', 'how long the first request of a batch waits for company', String(GATEWAY_BATCH_WINDOW_MS))
    .option('--json', 'print the listening address as JSON'))
    .action(async (raw: unknown) => {
      const opts = gatewaySchema.parse(raw);
      const listen = parseListen(opts.listen);
      await withLedger(opts.ledger, async (l) => {
        const svc = new GatewayService({
          ledger: l.ledger, blobs: l.blobs, upstream: new OpenAiCompletionsUpstream(opts.upstream), envVersion: opts.envVersion ?? `upstream:${opts.upstream}`,
          limits: { maxOutstanding: opts.maxOutstanding, maxPerRollout: opts.maxPerRollout }, batch: { maxBatch: opts.maxBatch, windowMs: opts.batchWindow },
        });
        const srv = await startGatewayServer(svc, l.blobs, listen);
        if (opts.json) process.stdout.write(JSON.stringify({ url: srv.url, ledger: l.location.ledger }) + '\n');
        else process.stdout.write(`gateway listening on ${srv.url} (upstream ${opts.upstream}, ledger ${l.location.ledger})\n`);
        await new Promise<void>((resolve) => {
          const stop = () => { void srv.close().then(resolve); };
          process.once('SIGTERM', stop);
          process.once('SIGINT', stop);
        });
      });
    });
}
