import type { Command } from 'commander';
import { z } from 'zod';
import { machineService } from '../../context.js';
import { parseFlags } from '../../machine-options.js';
import { printJson, printTable } from '../../output.js';
import { netModeOf } from '../../../smolfile/network.js';
import { TerminalSafeDecoder, terminalSafe } from '../../../util/terminal-safe.js';
import { detachedOutputFile, pumpConsoleLog, readDenials, readDetached } from '../../../vm/api/machines.js';

const logsSchema = z.object({
  console: z.boolean().optional(), follow: z.boolean().optional(), tail: z.coerce.number().int().min(0).optional(), net: z.boolean().optional(),
  json: z.boolean().optional(), raw: z.boolean().optional(),
});

export function register(parent: Command): void {
  parent.command('logs')
    .description("print the guest's console output (for `smol run -d`, its command's output)")
    .argument('<name>', 'machine name')
    .option('-f, --follow', 'keep printing new output')
    .option('-n, --tail <lines>', 'only the last N lines')
    .option('--console', 'for a detached run (smol run -d): the guest console instead of the command\'s output')
    .option('--net', 'connections and names the egress policy refused (time, destination, port, protocol)')
    .option('--json', 'with --net: print as JSON')
    .option('--raw', 'print the guest\'s bytes as they are, terminal escape sequences included (only for a guest you trust)')
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(logsSchema, opts);
      const svc = machineService();
      const rec = svc.store.get(name);
      if (o.net) {
        const all = readDenials(svc.layout(rec));
        const rows = o.tail !== undefined ? all.slice(-o.tail) : all;
        if (o.json) return printJson(rows);
        if (!rows.length) return void process.stdout.write(`no refused connections${netModeOf(rec.spec) === 'egress' ? '' : ` (machine "${rec.name}" has no egress: its guest has no way out to be refused)`}\n`);
        // a refused name is the guest's to choose, bytes and all
        return printTable(['TIME', 'PROTO', 'DESTINATION', 'PORT'], rows.map((d) => [d.time, d.protocol, terminalSafe(d.destination), d.port]));
      }
      // a detached run's command output is what its user wants to see (as with docker logs); --console for the kernel's
      const detached = !o.console && rec.ephemeral ? readDetached(svc, rec) : null;
      const file = detached ? detachedOutputFile(svc, rec) : svc.layout(rec).consoleLog;
      const ended = () => {
        const cur = svc.store.find(rec.id);
        if (!cur) return true; // removed: a --rm run whose command exited
        return detached ? readDetached(svc, cur)?.state === 'exited' : svc.refresh(cur).state !== 'running';
      };
      // the guest wrote these bytes: escape sequences in them would act on this terminal (util/terminal-safe.ts)
      const safe = o.raw ? null : new TerminalSafeDecoder();
      const print = (buf: Buffer) => { process.stdout.write(safe ? safe.write(buf) : buf); };
      // the guest decides how big the log grows: it is read and printed a chunk at a time, never whole; the
      // follower's open descriptor keeps reading after a --rm run's removal unlinks the file
      const log = pumpConsoleLog(file, o.tail, print);
      if (!o.follow) {
        log.close();
        return void (safe && process.stdout.write(safe.end()));
      }
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          const done = ended();
          log.drain(print);
          if (done) { clearInterval(timer); resolve(); }
        }, 200);
        process.once('SIGINT', () => { clearInterval(timer); resolve(); });
      });
      log.close();
      if (safe) process.stdout.write(safe.end());
    });
}
