import type { Command } from 'commander';
import chalk from 'chalk';
import { machineService } from '../../context.js';
import { formatBytes, formatDuration, printJson, printTable } from '../../output.js';
import { machineView } from './view.js';
import { formatPort } from '../../../smolfile/network.js';
import { matchesLabels, parseFilters } from '../../../smolfile/labels.js';

const color = (s: string) => (s === 'running' ? chalk.green(s) : s === 'crashed' ? chalk.red(s) : s === 'paused' ? chalk.yellow(s) : s);

export function register(parent: Command): void {
  parent.command('ls')
    .alias('list')
    .description('list machines (state is checked against the processes that exist)')
    .option('--json', 'print as JSON')
    .option('--filter <label=K[=V]>', 'only machines with this label (and value); repeatable, all must match', (v: string, p: string[] = []) => [...p, v])
    .action(async (opts: { json?: boolean; filter?: string[] }) => {
      const filters = parseFilters(opts.filter);
      const svc = machineService();
      const views = (await svc.list()).filter((r) => matchesLabels(r.labels, filters)).map((r) => machineView(svc, r));
      if (opts.json) return printJson(views);
      if (!views.length) return void process.stdout.write(filters.length ? 'no machines match\n' : 'no machines (create one: smol machine create NAME)\n');
      printTable(['NAME', 'STATE', 'IMAGE', 'CPUS', 'MEM', 'PSS', 'DISK', 'PORTS', 'PARENT', 'GEN', 'UP'], views.map((v) => [
        v.name, color(v.state), v.image === 'default' ? 'default' : v.image.split('/').pop(), v.cpus, `${v.memoryMiB}M`,
        v.usage.memory ? `${Math.round(v.usage.memory.pssMiB)}M` : null, v.usage.disk ? formatBytes(v.usage.disk.privateBytes) : null,
        v.ports.map(formatPort).join(' ') || null, v.parent, v.generation, v.state === 'running' && v.startedAt ? formatDuration(Date.now() - Date.parse(v.startedAt)) : null,
      ]));
    });
}
