/** Shared benchmark helpers: medians, percentiles and a side-by-side table with ratios. */
export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return Number.NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
export const median = (xs: number[]) => percentile(xs, 50);

export interface Row { metric: string; unit: string; value: number; baseline?: number; baselineLabel?: string; target?: string }

export function printRows(title: string, rows: Row[]): void {
  const fmt = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? '-' : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));
  const lines = [[ 'metric', 'median', 'unit', 'baseline', 'ratio', 'target' ]];
  for (const r of rows) {
    const ratio = r.baseline ? fmt(r.value / r.baseline) + 'x' : '-';
    lines.push([r.metric, fmt(r.value), r.unit, r.baseline === undefined ? '-' : `${fmt(r.baseline)} (${r.baselineLabel ?? 'baseline'})`, ratio, r.target ?? '-']);
  }
  const w = lines[0].map((_, i) => Math.max(...lines.map((l) => l[i].length)));
  console.log(`\n== ${title}`);
  for (const l of lines) console.log(l.map((c, i) => c.padEnd(w[i])).join('  '));
}

export async function timeRuns(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out;
}

/** The accelerator smol picks on this host (a /dev/kvm that cannot run guests means TCG), for labels and targets. */
export async function hostAccel(): Promise<'kvm' | 'tcg'> {
  const { chooseAccel } = await import('../src/vm/qemu/select.js');
  const { findQemu } = await import('../src/vm/qemu/detect.js');
  const q = await findQemu();
  return q ? chooseAccel(q.path) : 'tcg';
}
