/** `smol serve`: the HTTP API over the machines the CLI manages (docs/api.md); `smol serve openapi` prints its document. */
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import type { Command } from 'commander';
import { z } from 'zod';
import { UserError, ValidationError } from '../../errors/index.js';
import { readPem } from '../../rollout/gateway-client.js';
import { isLoopback, parseListen } from '../../rollout/gateway/server.js';
import { TokenSet, watchTokens } from '../../rollout/gateway/tokens.js';
import { ApiMetrics } from '../../api/metrics.js';
import { openMachineService } from '../../api/context.js';
import { openApiDocument } from '../../api/openapi.js';
import { Router } from '../../api/router.js';
import { allRoutes } from '../../api/routes/index.js';
import { startApiServer } from '../../api/server.js';
import { smolHome } from '../../util/paths.js';
import { parseFlags } from '../machine-options.js';
import { HostPathPolicy } from '../../api/host-paths.js';

const VERSION = '0.1.0';

export const serveSchema = z.strictObject({
  socket: z.string().min(1).optional(),
  listen: z.string().optional(),
  tokenFile: z.string().min(1).optional(),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  insecureNoAuth: z.boolean().optional(),
  hostPaths: z.string().min(1).optional(),
  json: z.boolean().optional(),
}).refine((o) => !o.tlsCert === !o.tlsKey, { path: ['tlsKey'], message: '--tls-cert and --tls-key go together' })
  .refine((o) => o.listen || !(o.tokenFile || o.tlsCert || o.insecureNoAuth), { path: ['listen'], message: '--token-file, --tls-cert and --insecure-no-auth apply to --listen; the Unix socket is guarded by its file mode' });

/**
 * TCP is reachable by every user of the host (loopback included), so it needs tokens unless the user says
 * otherwise in so many words; the Unix socket needs none, its mode 0600 admits only its owner.
 */
export function tcpProblem(o: { tokens: boolean; insecureNoAuth: boolean; host: string }): UserError | null {
  if (o.tokens && o.insecureNoAuth) return new UserError('--token-file and --insecure-no-auth contradict each other', { where: '--insecure-no-auth', hint: 'Drop --insecure-no-auth: with a token file every TCP request needs a token.' });
  if (o.tokens || o.insecureNoAuth) return null;
  return new UserError(`refusing to listen on ${o.host} without tokens: anyone who can connect could create machines and run commands in them`, {
    where: '--listen',
    hint: 'Give --token-file FILE (one token per line, e.g. from `openssl rand -hex 32`) and --tls-cert/--tls-key, use the Unix socket alone, or say --insecure-no-auth on a host and network you trust.',
  });
}

function readTls(o: { tlsCert?: string; tlsKey?: string }): { cert: string; key: string } | undefined {
  if (!o.tlsCert || !o.tlsKey) return undefined;
  const pair = { cert: readPem(o.tlsCert, '--tls-cert'), key: readPem(o.tlsKey, '--tls-key', 'PRIVATE KEY') };
  try {
    createSecureContext(pair); // what node:https would throw later, said now with the files named
  } catch (err) {
    throw new ValidationError(`--tls-cert ${o.tlsCert} and --tls-key ${o.tlsKey} cannot be used together: ${(err as Error).message}`, [{ path: '--tls-key', message: (err as Error).message }], { where: '--tls-key' });
  }
  return pair;
}

export function register(program: Command): void {
  const serve = program.command('serve')
    .description('serve the HTTP API (machines, exec, files; OpenAPI: smol serve openapi) on $SMOL_HOME/smol.sock')
    .option('--socket <path>', 'Unix socket to listen on (mode 0600)', undefined)
    .option('--listen <addr>', 'also listen on TCP HOST:PORT (port 0 picks one); needs --token-file')
    .option('--token-file <file>', 'bearer tokens for TCP, one per line (# comments); re-read on SIGHUP and on change')
    .option('--tls-cert <file>', 'serve TCP as HTTPS with this PEM certificate chain (with --tls-key)')
    .option('--tls-key <file>', 'the PEM private key of --tls-cert')
    .option('--insecure-no-auth', 'allow TCP without --token-file (anyone who can connect may run commands in machines)')
    .option('--host-paths <dirs>', 'host paths a request may name (volumes, image and artifact paths, secret files, pack paths) only under these directories, comma-separated, or `none`; also refuses secret env (default: unrestricted, a token is a shell as this user)')
    .option('--json', 'print where it listens as one JSON line')
    .addHelpText('after', `
Examples:
  $ smol serve                                          # $SMOL_HOME/smol.sock, no token (file mode 0600)
  $ curl --unix-socket ~/.smol/smol.sock http://x/v1/machines
  $ smol serve --listen 127.0.0.1:8480 --token-file tokens.txt
  $ smol serve openapi > openapi.json                   # the OpenAPI 3.1 document
`)
    .action(async (raw: unknown) => {
      const o = parseFlags(serveSchema, raw);
      const listen = o.listen ? parseListen(o.listen) : undefined;
      if (listen) {
        const refused = tcpProblem({ tokens: !!o.tokenFile, insecureNoAuth: !!o.insecureNoAuth, host: listen.host });
        if (refused) throw refused;
      }
      // read before anything listens, so a bad file is one clear error and nothing starts
      const tokens = o.tokenFile ? TokenSet.load(o.tokenFile) : undefined;
      const tls = readTls(o);
      const hostPaths = HostPathPolicy.parse(o.hostPaths);
      if (listen && tokens && !tls && !isLoopback(listen.host)) process.stderr.write(`serve: warning: tokens travel in clear text on ${listen.host}; give --tls-cert/--tls-key\n`);
      const home = smolHome();
      const svc = openMachineService(home, (line) => process.stderr.write(`smol: ${line}\n`));
      const ctx = { home, svc, metrics: new ApiMetrics(svc), version: VERSION, hostPaths };
      const socket = path.resolve(o.socket ?? path.join(home, 'smol.sock'));
      const srv = await startApiServer(ctx, new Router(allRoutes), { socket, listen, tokens, tls });
      if (o.json) process.stdout.write(JSON.stringify({ socket: srv.socket, url: srv.url, tokens: tokens?.size ?? 0, tls: !!tls }) + '\n');
      else process.stdout.write(`smol serve: listening on ${srv.socket}${srv.url ? ` and ${srv.url} (${tokens ? `${tokens.size} token(s)` : 'no tokens'})` : ''}\n`);
      const unwatch = tokens ? watchTokens(tokens, (line) => process.stderr.write(line.replace(/^gateway:/, 'serve:') + '\n')) : () => undefined;
      await new Promise<void>((resolve) => {
        const stop = () => { void srv.close().then(resolve); };
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
      });
      unwatch();
    });
  serve.command('openapi')
    .description('print the OpenAPI 3.1 document of the API (the checked-in copy is docs/openapi.json)')
    .action(() => { process.stdout.write(openApiText()); });
}

/** The document as checked in: two-space JSON and a final newline. */
export function openApiText(): string {
  return JSON.stringify(openApiDocument(allRoutes, VERSION), null, 2) + '\n';
}
