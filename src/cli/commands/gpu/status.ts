import type { Command } from 'commander';
import path from 'node:path';
import { z } from 'zod';
import { queryGpuDaemon } from '../../../cuda/daemon/index.js';
import { dataPaths } from '../../../util/paths.js';
import { formatBytes, printJson, printTable } from '../../output.js';

export const statusSchema = z.object({ control: z.string().min(1), json: z.boolean().optional() }).strict();

export function register(parent: Command): void {
  parent.command('status')
    .description('Sessions, device memory and call counts of the running GPU daemon')
    .option('--control <path>', 'the daemon\'s status socket', path.join(dataPaths().run, 'gpu.ctl'))
    .option('--json', 'machine-readable output')
    .action(async (raw) => {
      const opts = statusSchema.parse(raw);
      const st = await queryGpuDaemon(opts.control);
      if (opts.json) { printJson(st); return; }
      process.stdout.write(`endpoint ${st.endpoint}  driver ${st.libcuda}  pid ${st.pid}  closed sessions ${st.closedSessions}\n`);
      printTable(['SESSION', 'STARTED', 'CALLS', 'MEMORY', 'ALLOCS', 'ASYNC ERRORS'],
        st.sessions.map((s) => [s.id, s.startedAt, s.calls, formatBytes(s.memBytes), s.allocations, s.asyncErrors]));
    });
}
