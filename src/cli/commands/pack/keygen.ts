import type { Command } from 'commander';
import { z } from 'zod';
import { generateKeyPair } from '../../../artifact/index.js';
import { printJson } from '../../output.js';

export const keygenSchema = z.object({ output: z.string().min(1), force: z.boolean().default(false), json: z.boolean().default(false) }).strict();

export function register(parent: Command): void {
  parent.command('keygen')
    .description('create an ed25519 signing key pair: PREFIX.key (private, mode 0600) and PREFIX.pub')
    .requiredOption('-o, --output <prefix>', 'path prefix for the two PEM files')
    .option('--force', 'overwrite existing key files')
    .option('--json', 'print the result as JSON')
    .action(async (raw: Record<string, unknown>) => {
      const o = keygenSchema.parse(raw);
      const r = await generateKeyPair(o.output, { force: o.force });
      if (o.json) return printJson(r);
      process.stdout.write(`private key ${r.privateKey} (keep secret)\npublic key  ${r.publicKey}\nkey id      ${r.keyId}\n`);
    });
}
