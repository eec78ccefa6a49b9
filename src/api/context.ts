/** What every handler receives: the one machine service of this server (the CLI's database and locks). */
import { createQemuEngine, MachineService, MachineStore, openMachineDb } from '../vm/api/machines.js';
import { dataPaths } from '../util/paths.js';
import type { ApiMetrics } from './metrics.js';
import { HostPathPolicy } from './host-paths.js';

export interface ApiContext {
  home: string;
  svc: MachineService;
  metrics: ApiMetrics;
  version: string;
  /** `--host-paths`: which host paths a request may name; absent = unrestricted. */
  hostPaths?: HostPathPolicy;
}

const UNRESTRICTED = HostPathPolicy.unrestricted();
export const hostPaths = (ctx: ApiContext): HostPathPolicy => ctx.hostPaths ?? UNRESTRICTED;

/** As the CLI builds it (cli/context.ts): same database file, same engine, so both see the same machines. */
export function openMachineService(home: string, notice: (line: string) => void): MachineService {
  return new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home, { notice }) });
}
