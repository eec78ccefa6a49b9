/** The .smolmachine artifact service: pack, inspect, verify, extract, cache, sign, push/pull. */
export { packArtifact, packInputSchema, type PackInput, type PackProgress, type PackResult } from './pack.js';
export { inspectArtifact, verifyArtifact, assertVerified, describeFailure, type InspectResult, type VerifyResult, type EntryResult, type SignatureResult, type SignatureStatus } from './verify.js';
export { extractArtifact, defaultCaps, type ExtractCaps, type ExtractOptions, type ExtractResult } from './extract.js';
export { ensureExtracted, defaultArtifactCache, type EnsureOptions, type EnsureResult } from './cache.js';
export { generateKeyPair, loadPrivateKey, loadPublicKey, keyId, type KeyPairFiles } from './sign.js';
export { artifactManifestSchema, canResume, hostArch, FORMAT_VERSION, type ArtifactManifest, type ArtifactEntry, type EntryKind, type ResumeState, type HostQemu } from './manifest.js';
export { setMachineSource, getMachineSource, type MachineSource, type ResolvedSource } from './source.js';
export { pushArtifact, pullArtifact, parseRef, ARTIFACT_TYPE, LAYER_MEDIA_TYPE, type PushResult, type PullResult, type OciRef } from './oci.js';
export { prepareFromArtifact, type PrepareOptions, type PreparedArtifact } from './prepare.js';
