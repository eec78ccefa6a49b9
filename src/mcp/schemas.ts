/**
 * The tools' arguments. The MCP SDK validates each call against these before a handler runs and turns a
 * failure into an `isError` result naming the field, so a handler only ever sees well-formed input.
 * Names are the ones an agent guesses first; every field says its unit and default.
 */
import { z } from 'zod';
import { cpusSchema, memorySchema } from '../smolfile/schema.js';
import { DEFAULT_TIMEOUT_S, FILE_CAP_BYTES, MAX_FORK_COUNT, MAX_TIMEOUT_S, OUTPUT_CAP_BYTES } from './limits.js';

/** An absolute guest path; `..` is allowed (it is the guest's own tree), NUL is not (the agent's frames end strings with it). */
export const guestPathSchema = z.string()
  .min(1)
  .max(4096, 'a guest path is at most 4096 characters')
  .startsWith('/', 'must be an absolute guest path, such as /tmp/notes.txt')
  .refine((p) => !p.includes('\0'), 'a guest path cannot contain NUL bytes');

const machineNameSchema = z.string().min(1).max(128).regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/, 'a machine name is letters, digits, _ . - and starts with a letter or digit');

const envSchema = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name is letters, digits and _'), z.string())
  .describe('extra environment variables, {"NAME": "value"}');

const commandShape = {
  argv: z.array(z.string().refine((a) => !a.includes('\0'), 'an argument cannot contain NUL bytes')).min(1).max(4096).optional()
    .describe('the program and its arguments, run without a shell, e.g. ["python3", "-c", "print(1)"]; give argv or command'),
  command: z.string().min(1).max(256 * 1024).refine((c) => !c.includes('\0'), 'a command cannot contain NUL bytes').optional()
    .describe('a shell command line, run with /bin/sh -c (pipes, &&, redirection work); give argv or command'),
  env: envSchema.optional(),
  workdir: guestPathSchema.optional().describe('working directory in the guest (default: the machine\'s own, else /)'),
  timeout: z.number().positive().max(MAX_TIMEOUT_S, `at most ${MAX_TIMEOUT_S} seconds`).optional()
    .describe(`seconds before the command is killed (SIGTERM, then SIGKILL 3 s later; exit code 124); default ${DEFAULT_TIMEOUT_S}, at most ${MAX_TIMEOUT_S}`),
};

const shapeShape = {
  image: z.string().min(1).optional().describe('guest image: "default" (a small Linux with busybox), a rootfs directory or tarball on the host, or an image reference pulled before with `smol image pull`'),
  cpus: cpusSchema.optional().describe('virtual CPUs (default 1)'),
  memory: memorySchema.optional().describe('memory in MiB, or a string like "512M" or "1G" (default 256M)'),
  net: z.boolean().optional().describe('give the machine egress to the internet (off by default: no network)'),
};

export const runInputSchema = z.object({ ...commandShape, ...shapeShape });

export const execInputSchema = z.object({ machine: machineNameSchema.describe('a running machine, from create_machine or list_machines'), ...commandShape });

export const createMachineInputSchema = z.object({
  name: machineNameSchema.optional().describe('the machine\'s name (default: a generated one, returned)'),
  ...shapeShape,
  env: envSchema.optional().describe('environment every exec in the machine gets, {"NAME": "value"}'),
  workdir: guestPathSchema.optional().describe('default working directory for exec'),
  forkable: z.boolean().optional().describe('run it so that fork can clone it (default true; costs a shared-memory file the size of its memory)'),
});

export const machineInputSchema = z.object({ machine: machineNameSchema.describe('the machine\'s name') });

export const readFileInputSchema = z.object({
  machine: machineNameSchema.describe('a running machine'),
  path: guestPathSchema.describe('absolute path of a regular file in the guest'),
  encoding: z.enum(['utf8', 'base64']).optional().describe(`"utf8" (default; fails on a file that is not valid UTF-8) or "base64" for binary files; at most ${FILE_CAP_BYTES / 1024 / 1024} MiB`),
});

export const writeFileInputSchema = z.object({
  machine: machineNameSchema.describe('a running machine'),
  path: guestPathSchema.describe('absolute path in the guest; its directory must exist; an existing file is replaced'),
  content: z.string().max(Math.ceil(FILE_CAP_BYTES / 3) * 4 + 4, `at most ${FILE_CAP_BYTES / 1024 / 1024} MiB`).describe('the file\'s content'),
  encoding: z.enum(['utf8', 'base64']).optional().describe('how content is written: "utf8" (default) or "base64" for binary data'),
  mode: z.number().int().min(0).max(0o777).optional().describe('permission bits as a number, e.g. 493 for 0755 (default 420, 0644)'),
});

export const forkInputSchema = z.object({
  machine: machineNameSchema.describe('a running machine created with forkable (the default)'),
  count: z.number().int().min(1).max(MAX_FORK_COUNT, `at most ${MAX_FORK_COUNT} clones per call`).optional().describe('how many clones (default 1); each continues from this moment with the same files and processes'),
});

/** `run` and `exec` report the same thing. */
export const commandResultSchema = z.object({
  exitCode: z.number().int().describe('the command\'s exit code; 128+N when signal N ended it, 124 on timeout, 127 when the program does not exist'),
  timedOut: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  stdoutTruncated: z.boolean().describe(`true when stdout passed ${OUTPUT_CAP_BYTES / 1024 / 1024} MiB and the rest was dropped`),
  stderrTruncated: z.boolean(),
});
