/**
 * Docker credential helpers (`credsStore`, `credHelpers` in config.json): `docker-credential-NAME get`
 * with the server URL on stdin answers `{"ServerURL","Username","Secret"}` on stdout. As in Docker, the
 * helper's "credentials not found" means anonymous access, and any other failure fails the pull.
 */
import { ExitCode, SmolError } from '../errors/index.js';
import { run } from '../util/exec.js';

export interface HelperCredentials { username: string; password: string; source: string }

/** What docker-credential-helpers prints (to stdout, exit 1) when it has nothing for the server. */
const NOT_FOUND = 'credentials not found in native keychain';
const HELPER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function helperError(message: string, where: string, hint: string): SmolError {
  return new SmolError(message, ExitCode.prerequisite, { where, hint });
}

export async function helperGet(helper: string, serverUrl: string, configFile: string, env: NodeJS.ProcessEnv): Promise<HelperCredentials | null> {
  const file = `docker-credential-${helper}`;
  if (!HELPER_NAME.test(helper)) throw helperError(`${configFile}: credential helper name ${JSON.stringify(helper)} is not a plain name`, configFile, 'Name the helper by its suffix, as Docker does: "pass" runs docker-credential-pass.');
  let r;
  try {
    r = await run(file, ['get'], { input: serverUrl, env: env as Record<string, string | undefined>, allowFailure: true, timeoutMs: 60_000 });
  } catch (err) {
    const missing = (err as SmolError).exitCode === ExitCode.prerequisite;
    throw helperError(`getting credentials for ${serverUrl} failed: ${missing ? `${file} (named in ${configFile}) is not on PATH` : (err as Error).message}`, configFile,
      missing ? `Install ${file}, or remove the helper from ${configFile} and log in with \`smol registry login\`.` : `Check that \`echo ${serverUrl} | ${file} get\` works.`);
  }
  const out = r.stdout.trim();
  if (r.exitCode !== 0) {
    if (out === NOT_FOUND || r.stderr.trim() === NOT_FOUND) return null;
    throw helperError(`getting credentials for ${serverUrl} failed: ${file} get exited ${r.exitCode}${out || r.stderr.trim() ? `: ${(out || r.stderr.trim()).slice(0, 300)}` : ''}`, configFile, `Check that \`echo ${serverUrl} | ${file} get\` works, or log in again.`);
  }
  let json: { Username?: unknown; Secret?: unknown };
  try { json = JSON.parse(out) as typeof json; } catch { json = {}; }
  if (typeof json.Username !== 'string' || typeof json.Secret !== 'string') {
    throw helperError(`getting credentials for ${serverUrl} failed: ${file} get did not print {"Username", "Secret"} JSON`, configFile, `Check that \`echo ${serverUrl} | ${file} get\` prints the credentials.`);
  }
  if (json.Username === '<token>') {
    throw helperError(`${file} holds an identity token for ${serverUrl} (an OAuth refresh token), which smol cannot use`, configFile, `Log in with a password or access token instead: smol registry login ${serverUrl.replace(/^https:\/\/|\/v1\/$/g, '')}`);
  }
  return { username: json.Username, password: json.Secret, source: file };
}
