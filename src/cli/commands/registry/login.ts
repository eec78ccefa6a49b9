import type { Command } from 'commander';
import { z } from 'zod';
import { loginRegistry, logoutRegistry } from '../../../registry/index.js';
import { UserError } from '../../../errors/index.js';
import { printJson } from '../../output.js';

export const loginSchema = z.object({ username: z.string().min(1).optional(), password: z.string().optional(), passwordStdin: z.boolean().default(false), plainHttp: z.boolean().default(false), json: z.boolean().default(false) }).strict();

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

/** `login` and `logout`, registered under `smol registry` and again under `smol image`. */
export function register(parent: Command): void {
  parent.command('login')
    .description('check credentials against a registry and store them for pulls and pack push/pull ($SMOL_HOME/registry-auth.json, mode 0600)')
    .argument('[registry]', 'host[:port]; Docker Hub when omitted')
    .option('-u, --username <user>', 'user name')
    .option('-p, --password <password>', 'password or token (visible in the process list: prefer --password-stdin)')
    .option('--password-stdin', 'read the password or token from stdin')
    .option('--plain-http', 'use HTTP instead of HTTPS for a non-loopback registry')
    .option('--json', 'print the result as JSON')
    .action(async (registry: string | undefined, raw: Record<string, unknown>) => {
      const o = loginSchema.parse(raw);
      if (o.password !== undefined && o.passwordStdin) throw new UserError('--password and --password-stdin are exclusive', { where: '--password' });
      if (!o.username) throw new UserError('login needs --username', { where: '--username', hint: 'smol registry login HOST -u USER --password-stdin < token.txt' });
      const password = o.passwordStdin ? await readStdin() : o.password;
      if (!password) throw new UserError('login needs a password', { where: '--password-stdin', hint: 'Pipe it in: echo "$TOKEN" | smol registry login HOST -u USER --password-stdin' });
      const r = await loginRegistry(registry, { username: o.username, password }, { plainHttp: o.plainHttp });
      if (o.json) return printJson(r);
      process.stdout.write(`logged in to ${r.registry} as ${r.username} (stored in ${r.file})\n`);
    });
  parent.command('logout')
    .description("remove smol's stored credentials for a registry (Docker's own config is left alone)")
    .argument('[registry]', 'host[:port]; Docker Hub when omitted')
    .option('--json', 'print the result as JSON')
    .action(async (registry: string | undefined, raw: { json?: boolean }) => {
      const r = await logoutRegistry(registry);
      if (raw.json) return printJson(r);
      process.stdout.write(r.removed ? `logged out of ${r.registry}\n` : `not logged in to ${r.registry}\n`);
    });
}
