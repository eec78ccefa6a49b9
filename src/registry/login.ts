/** `smol registry login`: check the credentials against the registry's /v2/ (as `docker login` does), then store them. */
import { UserError } from '../errors/index.js';
import { normalizeRegistry, removeCredentials, storeCredentials, type Credentials } from './auth.js';
import { RegistryClient } from './client.js';
import { DOCKER_HUB } from './reference.js';

export interface LoginResult { registry: string; username: string; file: string }

export async function loginRegistry(registryInput: string | undefined, creds: Credentials, o: { plainHttp?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<LoginResult> {
  const registry = normalizeRegistry(registryInput);
  if (!creds.username || !creds.password) throw new UserError('login needs a username and a password', { hint: 'Pass --username and --password-stdin (the password on stdin).' });
  const client = await RegistryClient.open(registry, registry === DOCKER_HUB ? 'registry-1.docker.io' : registry, { ...o, credentials: creds });
  await client.request('/v2/', {}, { scope: '', what: `login to ${registry}`, ok: [200] });
  const file = await storeCredentials(registry, creds, o.env);
  return { registry, username: creds.username, file };
}

export async function logoutRegistry(registryInput: string | undefined, env?: NodeJS.ProcessEnv): Promise<{ registry: string; removed: boolean }> {
  const registry = normalizeRegistry(registryInput);
  return { registry, removed: await removeCredentials(registry, env) };
}
