import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Layering rules from DESIGN.md §1/§7: only util/exec imports execa, only the daemon's driver imports
// koffi, services never import the CLI stack.
const cliOnly = ['commander', 'chalk', 'ora', 'cli-table3'];
export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'build/**', 'coverage/**', '**/*.c', '**/*.h'] },
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
  // A thread stopped from outside inside a koffi call aborts the process (docs/cuda.md, "Stopping").
  {
    files: ['src/cuda/**/*.ts', 'src/vm/gpu.ts'],
    rules: { 'no-restricted-syntax': ['error', { selector: "CallExpression[callee.property.name='terminate']", message: 'Daemon threads call koffi: never terminate() one; let it end itself (docs/cuda.md, Stopping).' }] },
  },
);
