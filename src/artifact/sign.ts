/** ed25519 keys and signatures via node:crypto. Keys are PEM files: PKCS#8 private (0600), SPKI public. */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ArtifactError, ExitCode, NotFoundError, UserError } from '../errors/index.js';
import { writeFileAtomic } from './atomic.js';

export interface KeyPairFiles { privateKey: string; publicKey: string; keyId: string }

/** First 16 hex digits of SHA-256 over the public key's DER: short enough to show, long enough to compare. */
export function keyId(pub: KeyObject): string {
  return createHash('sha256').update(pub.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16);
}

/** What the manifest records about its signer: the key itself, so any copy can be checked for self-consistency, and its id to pin with --key. */
export function signatureInfo(pub: KeyObject): { algorithm: 'ed25519'; keyId: string; publicKey: string } {
  return { algorithm: 'ed25519', keyId: keyId(pub), publicKey: pub.export({ type: 'spki', format: 'der' }).toString('base64') };
}

export function publicKeyFromDer(b64: string): KeyObject {
  return createPublicKey({ key: Buffer.from(b64, 'base64'), format: 'der', type: 'spki' });
}

export async function generateKeyPair(prefix: string, opts: { force?: boolean } = {}): Promise<KeyPairFiles> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const files = { privateKey: `${prefix}.key`, publicKey: `${prefix}.pub` };
  const exclusive = !opts.force;
  await writeFileAtomic(files.privateKey, privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, { mode: 0o600, exclusive });
  await writeFileAtomic(files.publicKey, publicKey.export({ type: 'spki', format: 'pem' }) as string, { mode: 0o644, exclusive });
  return { ...files, keyId: keyId(publicKey) };
}

async function readKeyFile(file: string, what: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError(`${what} ${file} does not exist`, { where: file });
    throw err;
  }
}

export async function loadPrivateKey(file: string): Promise<KeyObject> {
  const pem = await readKeyFile(file, 'signing key');
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch (err) {
    throw new UserError(`signing key ${file} is not a PEM private key`, { where: file, cause: err }, ExitCode.invalidInput);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new UserError(`signing key ${file} is ${key.asymmetricKeyType}, not ed25519`, { where: file }, ExitCode.invalidInput);
  return key;
}

export async function loadPublicKey(file: string): Promise<KeyObject> {
  const pem = await readKeyFile(file, 'public key');
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (err) {
    throw new UserError(`public key ${file} is not a PEM public key`, { where: file, cause: err }, ExitCode.invalidInput);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new UserError(`public key ${file} is ${key.asymmetricKeyType}, not ed25519`, { where: file }, ExitCode.invalidInput);
  return key;
}

export function signBytes(key: KeyObject, data: Buffer): Buffer {
  return sign(null, data, key);
}

export function verifyBytes(key: KeyObject, data: Buffer, signature: Buffer): boolean {
  try {
    return verify(null, data, key, signature);
  } catch (err) {
    throw new ArtifactError('signature check failed to run', { cause: err });
  }
}
