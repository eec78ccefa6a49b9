import type { Command } from 'commander';
import { register as registerServe } from './serve.js';
import { register as registerStatus } from './status.js';

/** Registers `smol gpu …` subcommands; one file per subcommand in this folder. */
export function registerGpuCommands(program: Command): void {
  const gpu = program.command('gpu').description('CUDA/NVML remoting: serve the host GPU to guest shims');
  registerServe(gpu);
  registerStatus(gpu);
}
