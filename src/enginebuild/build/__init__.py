"""enginebuild.build: see docs/architecture.md (Packages)."""
