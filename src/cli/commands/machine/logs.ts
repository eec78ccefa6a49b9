import fs from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { machineService } from '../../context.js';
import { parseFlags } from '../../machine-options.js';
import { printJson, printTable } from '../../output.js';
import { readDenials } from '../../../vm/net/denials.js';
import { netModeOf } from '../../../smolfile/network.js';

const logsSchema = z.object({ follow: z.boolean().optional(), tail: z.coerce.number().int().min(0).optional(), net: z.boolean().optional(), json: z.boolean().optional() });

export function register(parent: Command): void {
  parent.command('logs')
    .description("print the guest's console output")
    .argument('<name>', 'machine name')
    .option('-f, --follow', 'keep printing new output')
    .option('-n, --tail <lines>', 'only the last N lines')
    .option('--net', 'connections and names the egress policy refused (time, destination, port, protocol)')
    .option('--json', 'with --net: print as JSON')
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(logsSchema, opts);
      const svc = machineService();
      const rec = svc.store.get(name);
      if (o.net) {
        const all = readDenials(svc.layout(rec));
        const rows = o.tail !== undefined ? all.slice(-o.tail) : all;
        if (o.json) return printJson(rows);
        if (!rows.length) return void process.stdout.write(`no refused connections${netModeOf(rec.spec) === 'egress' ? '' : ` (machine "${rec.name}" has no egress: its guest has no way out to be refused)`}\n`);
        return printTable(['TIME', 'PROTO', 'DESTINATION', 'PORT'], rows.map((d) => [d.time, d.protocol, d.destination, d.port]));
      }
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
