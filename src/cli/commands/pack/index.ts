import type { Command } from 'commander';
import { register as registerCreate } from './create.js';
import { register as registerInspect } from './inspect.js';
import { register as registerVerify } from './verify.js';
import { register as registerKeygen } from './keygen.js';
import { register as registerPush } from './push.js';
import { register as registerPull } from './pull.js';
import { register as registerRun } from './run.js';
import { register as registerPrune } from './prune.js';

/** Registers `smol pack …` subcommands; one file per subcommand in this folder. */
export function registerPackCommands(program: Command): void {
  const pack = program.command('pack').description('pack machines into verifiable .smolmachine artifacts; sign, inspect, push and pull them');
  registerCreate(pack);
  registerInspect(pack);
  registerVerify(pack);
  registerKeygen(pack);
  registerPush(pack);
  registerPull(pack);
  registerRun(pack);
  registerPrune(pack);
}
