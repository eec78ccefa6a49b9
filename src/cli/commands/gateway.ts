import { createSecureContext } from 'node:tls';
import type { Command } from 'commander';
import { z } from 'zod';
import { ValidationError } from '../../errors/index.js';
import { GatewayService } from '../../rollout/gateway/service.js';
import { isLoopback as isLoopbackHost, listenProblem, parseListen, startGatewayServer, type GatewayServer } from '../../rollout/gateway/server.js';
import { TokenSet, watchTokens } from '../../rollout/gateway/tokens.js';
import { readPem } from '../../rollout/gateway-client.js';
import { OpenAiCompletionsUpstream } from '../../rollout/gateway/upstream.js';
import { GATEWAY_BATCH_WINDOW_MS, GATEWAY_MAX_BATCH, GATEWAY_MAX_OUTSTANDING, GATEWAY_MAX_PER_ROLLOUT } from '../../rollout/limits.js';
import { blobsEnv, blobsOption, ledgerOption, withLedger } from './ledger/open.js';

export const gatewaySchema = z.strictObject({
  ledger: z.string().optional(),
  blobs: z.string().min(1).optional(),
  listen: z.string().default('127.0.0.1:8470'),
  upstream: z.url(),
  envVersion: z.string().optional(),
  maxOutstanding: z.coerce.number().int().positive().default(GATEWAY_MAX_OUTSTANDING),
  maxPerRollout: z.coerce.number().int().positive().default(GATEWAY_MAX_PER_ROLLOUT),
  maxBatch: z.coerce.number().int().positive().default(GATEWAY_MAX_BATCH),
  batchWindow: z.coerce.number().int().min(0).default(GATEWAY_BATCH_WINDOW_MS),
  tokenFile: z.string().min(1).optional(),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  insecureNoAuth: z.boolean().optional(),
  json: z.boolean().optional(),
}).refine((o) => !o.tlsCert === !o.tlsKey, { path: ['tlsKey'], message: '--tls-cert and --tls-key go together' });

function readTls(o: { tlsCert?: string; tlsKey?: string }): { cert: string; key: string } | undefined {
  if (!o.tlsCert || !o.tlsKey) return undefined;
  const pair = { cert: readPem(o.tlsCert, '--tls-cert'), key: readPem(o.tlsKey, '--tls-key', 'PRIVATE KEY') };
  try {
    // what node:https would throw later, said now with the files named: a key of another certificate, say
    createSecureContext(pair);
  } catch (err) {
    throw new ValidationError(`--tls-cert ${o.tlsCert} and --tls-key ${o.tlsKey} cannot be used together: ${(err as Error).message}`, [{ path: 'tlsKey', message: (err as Error).message }], { where: '--tls-key' });
  }
  return pair;
}

/** On SIGHUP the certificate is read again too (renewed certificates), for new connections only. */
function watchTls(srv: GatewayServer, o: { tlsCert?: string; tlsKey?: string }): () => void {
  if (!o.tlsCert || !('setSecureContext' in srv.server)) return () => undefined;
  const server = srv.server;
  const onHup = () => {
    try {
      server.setSecureContext(readTls(o)!);
      process.stderr.write(`gateway: SIGHUP: certificate ${o.tlsCert} reloaded\n`);
    } catch (err) {
      process.stderr.write(`gateway: SIGHUP: keeping the previous certificate: ${(err as Error).message}\n`);
    }
  };
  process.on('SIGHUP', onHup);
  return () => process.off('SIGHUP', onHup);
}

export function register(program: Command): void {
  blobsOption(ledgerOption(program.command('gateway')
    .description('serve the GPU inference gateway: batching, admission control (429 + Retry-After), idempotent durable results')
    .option('--listen <addr>', 'HOST:PORT to listen on (port 0 picks one)', '127.0.0.1:8470')
    .requiredOption('--upstream <url>', 'OpenAI-compatible completions server (vLLM, llama.cpp server)')
    .option('--env-version <v>', 'environment version recorded with every result (default: the upstream URL)')
    .option('--max-outstanding <n>', 'cap on admitted, unanswered requests overall', String(GATEWAY_MAX_OUTSTANDING))
    .option('--max-per-rollout <n>', 'cap on outstanding requests per rollout', String(GATEWAY_MAX_PER_ROLLOUT))
    .option('--max-batch <n>', 'largest batch sent upstream', String(GATEWAY_MAX_BATCH))
    .option('--batch-window <ms>', 'how long the first request of a batch waits for company', String(GATEWAY_BATCH_WINDOW_MS))
    .option('--token-file <file>', 'bearer tokens, one per line (# comments); re-read on SIGHUP and on change')
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate chain (with --tls-key)')
    .option('--tls-key <file>', 'the PEM private key of --tls-cert')
    .option('--insecure-no-auth', 'allow listening off loopback without --token-file (anyone who can connect is served)')
    .option('--json', 'print the listening address as JSON')))
    .action(async (raw: unknown) => {
      const opts = gatewaySchema.parse(raw);
      const listen = parseListen(opts.listen);
      const refused = listenProblem(listen.host, { tokens: !!opts.tokenFile, insecureNoAuth: !!opts.insecureNoAuth });
      if (refused) throw refused;
      // read before the ledger opens, so a bad file is one clear error and nothing starts
      const tokens = opts.tokenFile ? TokenSet.load(opts.tokenFile) : undefined;
      const tls = readTls(opts);
      if (tokens && !tls && !isLoopbackHost(listen.host)) process.stderr.write(`gateway: warning: tokens travel in clear text on ${listen.host}; give --tls-cert/--tls-key\n`);
      await withLedger(opts.ledger, async (l) => {
        const svc = new GatewayService({
          ledger: l.ledger, blobs: l.blobs, upstream: new OpenAiCompletionsUpstream(opts.upstream), envVersion: opts.envVersion ?? `upstream:${opts.upstream}`,
          limits: { maxOutstanding: opts.maxOutstanding, maxPerRollout: opts.maxPerRollout }, batch: { maxBatch: opts.maxBatch, windowMs: opts.batchWindow },
        });
        const srv = await startGatewayServer(svc, l.blobs, listen, { tokens, tls });
        const auth = tokens ? `${tokens.size} token(s)` : 'no tokens';
        if (opts.json) process.stdout.write(JSON.stringify({ url: srv.url, ledger: l.location.ledger, tokens: tokens?.size ?? 0, tls: !!tls }) + '\n');
        else process.stdout.write(`gateway listening on ${srv.url} (upstream ${opts.upstream}, ledger ${l.location.ledger}, ${auth})\n`);
        const unwatch = [tokens ? watchTokens(tokens, (line) => process.stderr.write(line + '\n')) : () => undefined, watchTls(srv, opts)];
        await new Promise<void>((resolve) => {
          const stop = () => { void srv.close().then(resolve); };
          process.once('SIGTERM', stop);
          process.once('SIGINT', stop);
        });
        for (const u of unwatch) u();
      }, blobsEnv(opts.blobs));
    });
}
