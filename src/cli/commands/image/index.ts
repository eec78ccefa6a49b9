import type { Command } from 'commander';
import { register as pull } from './pull.js';
import { register as ls } from './ls.js';
import { register as rm } from './rm.js';
import { register as prune } from './prune.js';
import { register as login } from '../registry/login.js';

/** Registers `smol image …`; `image login|logout` are the same commands as `registry login|logout`. */
export function registerImageCommands(program: Command): void {
  const image = program.command('image').description('images from OCI registries: pull, list, remove, prune the cache');
  for (const r of [pull, ls, rm, prune, login]) r(image);
}
