import type { Command } from 'commander';
import { register as convert } from './convert.js';

/** Registers `smol smolfile …` subcommands; one file per subcommand in this folder. */
export function registerSmolfileCommands(program: Command): void {
  const smolfile = program.command('smolfile').description('Smolfiles: convert smolvm\'s TOML Smolfile to smol\'s YAML');
  convert(smolfile);
}
