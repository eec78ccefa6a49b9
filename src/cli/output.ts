/** Rendering helpers shared by commands: --json output, tables, durations, sizes. */
import { createRequire } from 'node:module';
import { stdoutHasColor } from './color.js';

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

export function printTable(head: string[], rows: (string | number | null | undefined)[][]): void {
  // loaded on first use: its dependencies (string-width and co.) cost ~12 ms at start-up of every command
  const Table = createRequire(import.meta.url)('cli-table3') as typeof import('cli-table3');
  const t = new Table({ head, style: { head: stdoutHasColor() ? ['bold'] : [], border: [] }, chars: { top: '', 'top-mid': '', 'top-left': '', 'top-right': '', bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '', left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '  ' } });
  for (const r of rows) t.push(r.map((c) => (c === null || c === undefined ? '-' : String(c))));
  process.stdout.write(t.toString().split('\n').map((l) => l.trimEnd()).join('\n') + '\n');
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const m = Math.floor(ms / 60_000);
  return m < 60 ? `${m}m${Math.round((ms % 60_000) / 1000)}s` : `${Math.floor(m / 60)}h${m % 60}m`;
}
