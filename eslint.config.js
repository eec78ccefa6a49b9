import path from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The floors of src (issue #32): a module imports from its own floor or a lower one, never a higher one, so
// the arrows run down cli → rollout → vm → artifact/ledger/cuda/registry → smolfile/util → errors. Outside
// src/vm, vm is entered only through its doors: src/vm/index.ts, or a room of it under src/vm/api/ (the CLI
// uses the rooms so that a command loads only the part of vm it needs; see src/vm/index.ts). A local rule
// rather than no-restricted-imports: that rule skips import() (every lazy load of the CLI is one), and an
// import's text cannot tell src/registry from src/vm/store, while its resolved path can.
const srcDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'src');
const floors = { index: 5, cli: 5, rollout: 4, api: 4, mcp: 4, vm: 3, artifact: 2, ledger: 2, cuda: 2, registry: 2, smolfile: 1, util: 1, errors: 0, client: 0 };
const floorPath = 'cli → rollout → vm → artifact/ledger/cuda/registry → smolfile/util → errors';
const vmDoor = /^vm\/(index|api\/[\w-]+)\.[jt]s$/;
const floorOf = (rel) => (rel.includes('/') ? rel.split('/')[0] : rel.replace(/\.[jt]s$/, ''));
const floorsRule = {
  meta: { type: 'problem', schema: [] },
  create(context) {
    const file = context.filename;
    const from = path.relative(srcDir, file).split(path.sep).join('/');
    if (from.startsWith('..')) return {};
    const check = (node, spec) => {
      if (typeof spec !== 'string' || !spec.startsWith('.')) return;
      const to = path.relative(srcDir, path.resolve(path.dirname(file), spec)).split(path.sep).join('/');
      if (to.startsWith('..')) return;
      const [a, b] = [floorOf(from), floorOf(to)];
      const unplaced = [a, b].find((x) => !Object.hasOwn(floors, x));
      if (unplaced) return context.report({ node, message: `src/${unplaced} has no floor: give it one in eslint.config.js (floors).` });
      if (floors[b] > floors[a]) {
        return context.report({ node, message: `src/${from} imports src/${to}, a floor above it (${a} is below ${b}): imports run down ${floorPath}.` });
      }
      if (b === 'vm' && a !== 'vm' && !vmDoor.test(to)) {
        return context.report({ node, message: `src/${from} imports src/${to}, inside src/vm: import the machine API from src/vm/index.ts (or the src/vm/api/ room that exports it), adding the export there if it is missing.` });
      }
      if (a === 'vm' && b === 'vm' && vmDoor.test(to) && !vmDoor.test(from)) {
        return context.report({ node, message: `src/${from} imports the door src/${to}: inside vm, import the module itself (a door re-exports much of vm, and an import back through it makes an ESM cycle).` });
      }
    };
    return {
      ImportDeclaration: (n) => check(n.source, n.source.value),
      ExportNamedDeclaration: (n) => n.source && check(n.source, n.source.value),
      ExportAllDeclaration: (n) => check(n.source, n.source.value),
      ImportExpression: (n) => check(n.source, n.source.value),
      TSImportType: (n) => check(n, (n.source ?? n.argument?.literal)?.value), // `source` since typescript-eslint 8.x
    };
  },
};

// Layering rules from DESIGN.md §1/§7: only util/exec imports execa, only the daemon's driver imports
// koffi, services never import the CLI stack.
const cliOnly = ['commander', 'chalk', 'ora', 'cli-table3'];
export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'build/**', 'coverage/**', '.gpukit/**', '**/*.c', '**/*.h'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', URL: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', fetch: 'readonly', setImmediate: 'readonly', queueMicrotask: 'readonly', performance: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': ['error', { paths: [
        { name: 'execa', message: 'Only src/util/exec.ts imports execa.' },
        { name: 'koffi', message: 'Only src/cuda/daemon/driver.ts (and src/util/ffi.ts) import koffi.' },
      ] }],
    },
  },
  { files: ['src/util/exec.ts'], rules: { 'no-restricted-imports': 'off' } },
  { files: ['src/cuda/daemon/driver.ts', 'src/cuda/daemon/driver/**', 'src/util/ffi.ts'], rules: { 'no-restricted-imports': 'off' } },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**'],
    rules: { 'no-restricted-imports': ['error', { paths: [
      { name: 'execa', message: 'Only src/util/exec.ts imports execa.' },
      { name: 'koffi', message: 'Only the daemon driver module imports koffi.' },
      ...cliOnly.map((name) => ({ name, message: 'Services never import CLI packages (DESIGN.md §1).' })),
    ], patterns: [{ group: ['**/cli/**', '../cli/*'], message: 'Services never import the CLI layer.' }] }] },
  },
  { files: ['src/util/exec.ts', 'src/cuda/daemon/driver.ts', 'src/cuda/daemon/driver/**', 'src/util/ffi.ts'], rules: { 'no-restricted-imports': 'off' } },
  { files: ['src/**/*.ts'], plugins: { smol: { rules: { floors: floorsRule } } }, rules: { 'smol/floors': 'error' } },
  // A thread stopped from outside inside a koffi call aborts the process (docs/cuda.md, "Stopping").
  {
    files: ['src/cuda/**/*.ts', 'src/vm/gpu.ts'],
    rules: { 'no-restricted-syntax': ['error', { selector: "CallExpression[callee.property.name='terminate']", message: 'Daemon threads call koffi: never terminate() one; let it end itself (docs/cuda.md, Stopping).' }] },
  },
);
