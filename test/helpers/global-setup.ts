/**
 * Integration global setup: compile dist/ and the native parts once, and prepare the shared assets (kernel,
 * images) with the real `smol setup`, so each test file starts from a built, set-up tree.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { root, sharedHome, smolBin } from './cli.js';

export default function setup(): void {
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  fs.mkdirSync(sharedHome(), { recursive: true });
  if (fs.existsSync(`${root}/dist/cli/commands/setup.js`)) {
    execFileSync(process.execPath, [smolBin, 'setup'], { cwd: root, stdio: 'inherit', env: { ...process.env, SMOL_HOME: sharedHome(), SMOL_ASSETS: sharedHome() } });
  }
}
