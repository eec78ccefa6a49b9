/**
 * Runs the TypeScript fuzz targets with fast-check under a time budget (scripts/fuzz.sh calls it).
 *
 *   node --import tsx test/fuzz/run.ts --seconds S [--target NAME]... [--seed N]
 *
 * Each target runs in a child process of its own, so a synchronous hang is caught by a watchdog here:
 * the child writes each input to crashes/<target>/.current before running it, and a child killed for
 * overrunning leaves that input behind as hang-<sha>. Failures shrink, are saved as
 * crashes/<target>/crash-<sha>, and make the exit status 1. The last line is a JSON summary.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { FUZZ_DIR, bounded, corpus } from './lib/target.js';
import { TARGETS, targetByName } from './targets/index.js';

interface Summary { target: string; execs: number; crashes: { file: string; message: string }[]; seconds: number }

const argv = process.argv.slice(2);
const opt = (name: string): string[] => argv.flatMap((a, i) => (a === `--${name}` && argv[i + 1] !== undefined ? [argv[i + 1]] : []));
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex').slice(0, 16);
const crashDir = (t: string) => path.join(FUZZ_DIR, 'crashes', t);

/** One target in this process: repeated fast-check runs until the budget is spent. */
async function child(name: string, seconds: number, seed: number): Promise<Summary> {
  const t = targetByName(name);
  await t.setup?.();
  const seeds = [...corpus(name), ...((await t.extraSeeds?.()) ?? [])];
  const dir = crashDir(name);
  mkdirSync(dir, { recursive: true });
  const current = path.join(dir, '.current');
  const summary: Summary = { target: name, execs: 0, crashes: [], seconds };
  const seen = new Set<string>();
  const end = Date.now() + seconds * 1000;
  try {
    for (let round = 0; Date.now() < end && summary.crashes.length < 5; round++) {
      const prop = fc.asyncProperty(t.arbitrary(seeds), async (input) => {
        summary.execs++;
        writeFileSync(current, input);
        await bounded(name, t.timeoutMs ?? 5000, () => t.run(input));
      });
      const r = await fc.check(prop, { seed: seed + round, numRuns: Number.MAX_SAFE_INTEGER, interruptAfterTimeLimit: Math.max(1, end - Date.now()), endOnFailure: false });
      if (!r.failed || !r.counterexample) continue;
      const input = r.counterexample[0];
      const err = r.errorInstance as Error | undefined;
      const message = (err?.message ?? String(r.errorInstance)).split('\n')[0];
      const key = message.replace(/\d+/g, 'N');
      if (seen.has(key)) continue;
      seen.add(key);
      const file = path.join(dir, `crash-${sha(input)}`);
      writeFileSync(file, input);
      writeFileSync(`${file}.txt`, `${message}\n\n${err?.stack ?? ''}\n${err?.cause instanceof Error ? `cause: ${err.cause.stack}` : ''}\n`);
      summary.crashes.push({ file: path.relative(process.cwd(), file), message });
    }
  } finally {
    await t.teardown?.();
  }
  return summary;
}

function runChild(name: string, seconds: number, seed: number): Promise<Summary> {
  const self = fileURLToPath(import.meta.url);
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [...process.execArgv, self, '--child', name, '--seconds', String(seconds), '--seed', String(seed)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    // Past the budget plus shrinking time, the child is stuck in a synchronous loop: a hang.
    const watchdog = setTimeout(() => p.kill('SIGKILL'), (seconds + 60) * 1000);
    p.on('close', (code) => {
      clearTimeout(watchdog);
      const last = out.trim().split('\n').pop() ?? '';
      try { resolve(JSON.parse(last) as Summary); return; } catch { /* no summary: it died or hung */ }
      const current = path.join(crashDir(name), '.current');
      const crashes: Summary['crashes'] = [];
      if (existsSync(current)) {
        const file = path.join(crashDir(name), `hang-${Date.now()}`);
        renameSync(current, file);
        crashes.push({ file: path.relative(process.cwd(), file), message: `child exited ${code} without a summary (hang or abort) on this input` });
      }
      resolve({ target: name, execs: -1, crashes, seconds });
    });
  });
}

async function main(): Promise<number> {
  const seconds = Number(opt('seconds')[0] ?? 60);
  const seed = Number(opt('seed')[0] ?? Date.now() % 2 ** 31);
  const only = opt('child')[0];
  if (only) {
    const s = await child(only, seconds, seed);
    process.stdout.write(`${JSON.stringify(s)}\n`);
    return 0;
  }
  const names = opt('target').length ? opt('target') : TARGETS.map((t) => t.name);
  const per = Math.max(5, Math.floor(seconds / names.length));
  const all: Summary[] = [];
  for (const n of names) {
    const s = await runChild(n, per, seed);
    all.push(s);
    process.stdout.write(`fuzz ${n}: ${s.execs} executions in ${per} s, ${s.crashes.length} crash(es)${s.crashes.map((c) => `\n  ${c.file}: ${c.message}`).join('')}\n`);
  }
  process.stdout.write(`${JSON.stringify(all)}\n`);
  return all.some((s) => s.crashes.length > 0) ? 1 : 0;
}

main().then((code) => process.exit(code), (err: unknown) => { process.stderr.write(`${(err as Error).stack ?? String(err)}\n`); process.exit(2); });
