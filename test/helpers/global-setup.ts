/**
 * Integration global setup: compile dist/ and the native parts once, and prepare the shared assets (kernel,
 * images) with the real `smol setup`, so each test file starts from a built, set-up tree.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { assetsHome } from '../../src/util/paths.js';
import { root, sharedHome, smolBin } from './cli.js';

export default function setup(): void {
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  fs.mkdirSync(sharedHome(), { recursive: true });
  seedKernel();
  if (fs.existsSync(`${root}/dist/cli/commands/setup.js`)) {
    execFileSync(process.execPath, [smolBin, 'setup'], { cwd: root, stdio: 'inherit', env: { ...process.env, SMOL_HOME: sharedHome(), SMOL_ASSETS: sharedHome() } });
  }
}

/**
 * The kernel scripts/setup.sh already fetched into the user's assets: copied rather than downloaded again
 * (6 s on CI). `smol setup` still checks it (findKernel) and fetches afresh one that is stale or incomplete;
 * the fetch itself is tested in boot/atomic.test.ts.
 */
function seedKernel(): void {
  const dest = path.join(sharedHome(), 'kernel');
  const src = path.join(assetsHome(), 'kernel');
  if (fs.existsSync(dest) || !fs.existsSync(path.join(src, 'current')) || path.resolve(src) === path.resolve(dest)) return;
  const tmp = `${dest}.seed-${process.pid}`;
  try {
    fs.cpSync(src, tmp, { recursive: true, verbatimSymlinks: true });
    fs.renameSync(tmp, dest);
  } catch {
    fs.rmSync(tmp, { recursive: true, force: true }); // smol setup fetches it then
  }
}
