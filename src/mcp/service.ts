/**
 * The machine service over the data dir the CLI uses, built as src/cli/context.ts builds it (that module sits
 * on the CLI's floor, above this one): `smol mcp` and the CLI see the same machines, under the same locks.
 */
import { createQemuEngine, MachineService, MachineStore, openMachineDb } from '../vm/api/machines.js';
import { dataPaths, smolHome } from '../util/paths.js';

export function openMachineService(home = smolHome()): MachineService {
  // notices (such as "using TCG") go to stderr: stdout carries nothing but JSON-RPC
  const notice = (line: string) => { process.stderr.write(`smol: ${line}\n`); };
  return new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home, { notice }) });
}
