/** The one OCI registry client: references, credentials, the auth dance, verified blob transfer. */
export { parseImageReference, isInsecureRegistry, registryBaseUrl, DOCKER_HUB, type ImageReference } from './reference.js';
export { loginRegistry, logoutRegistry, type LoginResult } from './login.js';
export { parseWwwAuthenticate, normalizeRegistry, findCredentials, storeCredentials, removeCredentials, smolAuthFile, dockerConfigFile, type Challenge, type Credentials } from './auth.js';
export { RegistryClient, RegistryAuthError, sweepDeadTemps, tempName, sha256Of, type ClientOptions, type FetchedManifest } from './client.js';
