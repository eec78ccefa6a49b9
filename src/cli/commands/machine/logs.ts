import fs from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { machineService } from '../../context.js';
import { parseFlags } from '../../machine-options.js';

const logsSchema = z.object({ follow: z.boolean().optional(), tail: z.coerce.number().int().min(0).optional() });

export function register(parent: Command): void {
  parent.command('logs')
    .description("print the guest's console output")
    .argument('<name>', 'machine name')
    .option('-f, --follow', 'keep printing new output')
    .option('-n, --tail <lines>', 'only the last N lines')
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(logsSchema, opts);
      const svc = machineService();
      const rec = svc.store.get(name);
      const file = svc.layout(rec).consoleLog;
      const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
      const lines = text.split('\n');
      process.stdout.write(o.tail !== undefined ? lines.slice(-o.tail - 1).join('\n') : text);
      if (!o.follow) return;
      let pos = Buffer.byteLength(text);
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          const size = fs.existsSync(file) ? fs.statSync(file).size : 0;
          if (size > pos) {
            const fd = fs.openSync(file, 'r');
            const buf = Buffer.alloc(size - pos);
            fs.readSync(fd, buf, 0, buf.length, pos);
            fs.closeSync(fd);
            pos = size;
            process.stdout.write(buf);
          }
          if (svc.refresh(svc.store.get(name)).state !== 'running') { clearInterval(timer); resolve(); }
        }, 200);
        process.once('SIGINT', () => { clearInterval(timer); resolve(); });
      });
    });
}
