"""Security: keys and key files, signers, signed Interests, per-call secrets and manifests.
Built on icn.wire only."""
