/**
 * The shape of src in numbers (issue #32's before/after): files and lines per top folder, the median and
 * largest file, and imports of a vm inner file from outside src/vm (the door rule's count; vm/index.ts and its
 * rooms vm/api/*.ts are the door). Usage: npx tsx scripts/house-metrics.ts [root] [--list]
 */
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(process.argv[2] ?? '.');
const src = path.join(root, 'src');

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

const files = walk(src).map((f) => ({ f: path.relative(src, f), lines: fs.readFileSync(f, 'utf8').split('\n').length - 1 }));
const byFolder = new Map<string, { files: number; lines: number }>();
for (const { f, lines } of files) {
  const top = f.includes('/') ? f.split('/')[0] : '.';
  const e = byFolder.get(top) ?? { files: 0, lines: 0 };
  e.files++; e.lines += lines;
  byFolder.set(top, e);
}
const total = files.reduce((s, x) => s + x.lines, 0);
console.log('folder      files  lines  share');
for (const [k, v] of [...byFolder].sort((a, b) => b[1].lines - a[1].lines)) {
  console.log(`${k.padEnd(10)} ${String(v.files).padStart(6)} ${String(v.lines).padStart(6)} ${(100 * v.lines / total).toFixed(0).padStart(5)}%`);
}
const sorted = files.map((x) => x.lines).sort((a, b) => a - b);
const largest = [...files].sort((a, b) => b.lines - a.lines).slice(0, 5);
console.log(`total ${files.length} files, ${total} lines; median ${sorted[Math.floor(sorted.length / 2)]}; largest ${largest.map((x) => `${x.f} ${x.lines}`).join(', ')}`);

// an import from outside vm that names a vm file other than its door (vm/index or a room under vm/api/)
const door = /^vm\/(index|api\/[\w-]+)\.js$/;
let inner = 0;
const offenders: string[] = [];
for (const { f } of files) {
  if (f.startsWith('vm/')) continue;
  const text = fs.readFileSync(path.join(src, f), 'utf8');
  for (const m of text.matchAll(/(?:from|import\()\s*'([^']+)'/g)) {
    const target = path.relative(src, path.resolve(path.dirname(path.join(src, f)), m[1]));
    if (target.startsWith('vm/') && !door.test(target)) { inner++; offenders.push(`${f} -> ${target}`); }
  }
}
console.log(`imports of vm inner files (not vm/index.ts or vm/api/*.ts) from outside vm: ${inner}`);
if (process.argv.includes('--list')) for (const o of offenders) console.log(`  ${o}`);
