import type { Command } from 'commander';
import { machineService } from '../../context.js';
import { formatBytes, printJson } from '../../output.js';
import { machineView } from './view.js';
import { formatPort } from '../../../smolfile/network.js';
import { terminalSafe } from '../../../util/terminal-safe.js';

export function register(parent: Command): void {
  parent.command('status')
    .description('show one machine')
    .argument('<name>', 'machine name')
    .option('--json', 'print as JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      const svc = machineService();
      const v = machineView(svc, svc.refresh(svc.store.get(name)));
      if (opts.json) return printJson(v);
      const { usage, ports, allow, detached, labels, secrets, volumes, ...rest } = v;
      for (const [k, val] of Object.entries(rest)) process.stdout.write(`${k.padEnd(12)} ${val ?? '-'}\n`);
      process.stdout.write(`${'ports'.padEnd(12)} ${ports.map(formatPort).join(' ') || '-'}\n`);
      process.stdout.write(`${'volumes'.padEnd(12)} ${volumes.map((x) => `${x.host}:${x.guest}${x.readonly ? ':ro' : ''}`).join(' ') || '-'}\n`);
      process.stdout.write(`${'labels'.padEnd(12)} ${Object.entries(labels).map(([k, l]) => `${k}=${l}`).join(' ') || '-'}\n`);
      process.stdout.write(`${'secrets'.padEnd(12)} ${[...secrets.env.map((n) => `env:${n}`), ...secrets.files.map((n) => `file:${n}`)].join(' ') || '-'}\n`);
      process.stdout.write(`${'allow'.padEnd(12)} ${allow.join(' ') || (v.net ? 'all but the host and link-local' : '-')}\n`);
      if (detached) {
        const how = detached.state !== 'exited' ? detached.state : detached.exitCode !== null ? `exited ${detached.exitCode}` : `ended: ${terminalSafe(detached.error ?? 'unknown')}`;
        process.stdout.write(`${'command'.padEnd(12)} ${detached.command.join(' ')} (${how}${detached.rm ? ', removed on exit' : ''})\n`);
      }
      const m = usage.memory;
      process.stdout.write(`${'memory'.padEnd(12)} ${m ? `PSS ${m.pssMiB} MiB (own ${m.privateMiB}, shared ${m.sharedMiB}, RSS ${m.rssMiB})` : '-'}\n`);
      const d = usage.disk;
      process.stdout.write(`${'disk'.padEnd(12)} ${d ? `own ${formatBytes(d.privateBytes)}, shared ${formatBytes(d.sharedBytes)} in ${d.chain.length - 1} backing file${d.chain.length === 2 ? '' : 's'}` : '-'}\n`);
    });
}
