"""enginebuild.lock: see docs/architecture.md (Packages)."""
