import type { Command } from 'commander';
import path from 'node:path';
import { z } from 'zod';
import { startGpuDaemon } from '../../../cuda/daemon/index.js';
import { dataPaths } from '../../../util/paths.js';
import { printJson } from '../../output.js';

export const serveSchema = z.object({
  listen: z.string().regex(/^(unix:.+|tcp:[^:]+:\d+|vsock:(\d+:)?\d+)$/, 'expected unix:PATH, tcp:HOST:PORT or vsock:PORT'),
  libcuda: z.string().min(1).optional(),
  quota: z.string().regex(/^\d+(\.\d+)?[KMGT]?i?B?$/i, 'expected a size such as 8GiB').optional(),
  control: z.string().min(1).optional(),
  maxSessions: z.coerce.number().int().min(1).max(1024).optional(),
  json: z.boolean().optional(),
}).strict();

function parseSize(s: string): number {
  const m = /^(\d+(?:\.\d+)?)([KMGT]?)/i.exec(s)!;
  return Math.floor(Number(m[1]) * 1024 ** ' KMGT'.indexOf((m[2] || ' ').toUpperCase()));
}

export function register(parent: Command): void {
  parent.command('serve')
    .description('Serve CUDA/NVML calls from guest shims on this host\'s GPU (runs until interrupted)')
    .option('--listen <endpoint>', 'unix:PATH | tcp:HOST:PORT | vsock:PORT', `unix:${path.join(dataPaths().run, 'cuda.sock')}`)
    .option('--libcuda <path>', 'libcuda.so.1 to load (default: the system\'s)')
    .option('--quota <size>', 'device memory each guest process may hold, e.g. 8GiB')
    .option('--max-sessions <n>', 'guest processes served at once; more are refused (default $SMOL_GPU_MAX_SESSIONS, else 8)')
    .option('--control <path>', 'status socket for `smol gpu status`', path.join(dataPaths().run, 'gpu.ctl'))
    .option('--json', 'print the endpoint as JSON once listening')
    .action(async (raw) => {
      const opts = serveSchema.parse(raw);
      const daemon = await startGpuDaemon({ listen: opts.listen, libcuda: opts.libcuda, quotaBytes: opts.quota ? parseSize(opts.quota) : undefined, control: opts.control, maxSessions: opts.maxSessions });
      if (opts.json) printJson({ endpoint: daemon.endpoint, control: daemon.control, pid: process.pid });
      else process.stdout.write(`smol gpu: serving ${daemon.endpoint} (status: ${daemon.control})\n`);
      await new Promise<void>((resolve) => {
        const stop = () => {
          void daemon.close().then((r) => {
            const freed = r.sessions.reduce((n, x) => n + x.freedBytes, 0);
            process.stderr.write(`smol gpu: stopped in ${Math.round(r.stopMs)} ms; ended ${r.sessions.length} session(s), freed ${freed} bytes of device memory\n`);
            resolve();
          });
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
    });
}
