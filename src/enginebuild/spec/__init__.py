"""enginebuild.spec: see docs/architecture.md (Packages)."""
