/**
 * Where a bench keeps state and finds its guest: a scratch SMOL_HOME (unless one is set), and the kernel
 * and images `smol` itself uses ($SMOL_ASSETS, else $SMOL_HOME, else ~/.local/share/smol), which
 * `bash scripts/setup.sh` installs. Resolved before the scratch home replaces SMOL_HOME in process.env.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assetsHome, dataPaths } from '../src/util/paths.js';

export interface BenchHome { home: string; assets: string; ownHome: boolean }

export function benchHome(tag: string): BenchHome {
  const assets = assetsHome();
  const ownHome = !process.env.SMOL_HOME;
  const home = process.env.SMOL_HOME ?? fs.mkdtempSync(path.join(os.tmpdir(), `smol-bench-${tag}-`));
  process.env.SMOL_HOME = home;
  process.env.SMOL_ASSETS = assets;
  return { home, assets, ownHome };
}

/** Fails with what to run when the guest kernel is missing, instead of a TypeError deep inside. */
export function requireGuest(assets: string): void {
  if (fs.existsSync(path.join(dataPaths(assets).kernel, 'current'))) return;
  console.error(`bench: no guest kernel under ${assets}. Run \`bash scripts/setup.sh\` (or \`smol setup\`), or set SMOL_ASSETS.`);
  process.exit(69);
}

/** BENCH_QUICK=1: one run of each figure, smallest sizes; for checking that a bench still works. */
export const quickMode = process.env.BENCH_QUICK === '1';
