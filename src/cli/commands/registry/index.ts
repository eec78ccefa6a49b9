import type { Command } from 'commander';
import { register as registerLogin } from './login.js';

/** Registers `smol registry login|logout` (also reachable as `smol image login|logout`). */
export function registerRegistryCommands(program: Command): void {
  registerLogin(program.command('registry').description('credentials for OCI registries, shared by image pulls and pack push/pull'));
}
