import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Unit tests run in parallel; integration tests boot real VMs and servers, so they run one file at a time.
// Unit's maxWorkers: vitest's default is one less than the CPUs, a single worker on CI's 2 cores, where many
// unit files wait on child processes (qemu-img, sqlite writers, tsx children) and a second worker fills that wait.
export default defineConfig({
  test: {
    passWithNoTests: true,
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'], testTimeout: 20_000, maxWorkers: Math.max(2, availableParallelism()) } },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/helpers/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
