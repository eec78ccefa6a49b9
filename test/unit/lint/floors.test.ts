/**
 * The floors rule of eslint.config.js (issue #32): vm entered only through its doors, and no import up the floors
 * cli → rollout → vm → artifact/ledger/cuda/registry → smolfile/util → errors. Each snippet is linted as if it
 * were the named file under src, with the project's own config.
 */
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..', '..', '..');
const eslint = new ESLint({ cwd: root });

async function floorErrors(file: string, code: string): Promise<string[]> {
  const [r] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return r.messages.filter((m) => m.ruleId === 'smol/floors').map((m) => m.message);
}

describe('eslint floors rule', () => {
  it('refuses a vm inner file imported from outside vm, statically, re-exported, or with import()', async () => {
    expect(await floorErrors('src/rollout/x.ts', "import { saveForkPoint } from '../vm/fork/save.js';\nexport { saveForkPoint };\n")).toEqual([
      expect.stringContaining('imports src/vm/fork/save.js, inside src/vm'),
    ]);
    expect(await floorErrors('src/cli/commands/x.ts', "export const f = async () => (await import('../../vm/fork/points.js')).listPoints;\n")).toHaveLength(1);
    expect(await floorErrors('src/index.ts', "export * from './vm/run.js';\n")).toHaveLength(1);
    expect(await floorErrors('src/cli/x.ts', "export type S = import('../vm/service.js').MachineService;\n")).toHaveLength(1);
  });

  it('lets callers outside vm through the doors', async () => {
    const code = "import { runEphemeral } from '../vm/index.js';\nimport { copy } from '../vm/api/exec.js';\nexport const f = () => import('../vm/api/fork.js');\nexport { runEphemeral, copy };\n";
    expect(await floorErrors('src/cli/x.ts', code)).toEqual([]);
    expect(await floorErrors('src/rollout/x.ts', code)).toEqual([]);
  });

  it('refuses an import up the floors', async () => {
    expect(await floorErrors('src/util/x.ts', "import { machineService } from '../cli/context.js';\nexport { machineService };\n")).toEqual([
      expect.stringContaining('a floor above it (util is below cli)'),
    ]);
    expect(await floorErrors('src/vm/x.ts', "export { Worker } from '../rollout/worker.js';\n")).toHaveLength(1);
    expect(await floorErrors('src/errors/x.ts', "export { smolHome } from '../util/paths.js';\n")).toHaveLength(1);
    // src/registry (the OCI client) is below vm; src/vm/store is vm itself (a path, not the import's text, tells a floor): told apart by the resolved path
    expect(await floorErrors('src/registry/x.ts', "export { openMachineDb } from '../vm/store/db.js';\n")).toEqual([
      expect.stringContaining('a floor above it (registry is below vm)'),
    ]);
    expect(await floorErrors('src/vm/image/x.ts', "export { RegistryClient } from '../../registry/index.js';\nexport { openMachineDb } from '../store/db.js';\n")).toEqual([]);
  });

  it('allows imports down and across a floor', async () => {
    expect(await floorErrors('src/cli/x.ts', "export * from '../rollout/index.js';\nexport * from '../errors/index.js';\n")).toEqual([]);
    expect(await floorErrors('src/artifact/x.ts', "export * from '../registry/index.js';\n")).toEqual([]);
  });

  it('refuses a door imported from inside vm, where it would make an ESM cycle', async () => {
    expect(await floorErrors('src/vm/fork/x.ts', "export { MachineService } from '../api/machines.js';\n")).toEqual([
      expect.stringContaining('imports the door src/vm/api/machines.js'),
    ]);
    expect(await floorErrors('src/vm/x.ts', "export * from './index.js';\n")).toHaveLength(1);
  });

  it('refuses a folder of src that has no floor yet', async () => {
    expect(await floorErrors('src/cloud/x.ts', "export {};\n")).toEqual([]);
    expect(await floorErrors('src/cloud/x.ts', "export * from '../util/paths.js';\n")).toEqual([expect.stringContaining('src/cloud has no floor')]);
  });
});
