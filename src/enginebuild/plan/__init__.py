"""enginebuild.plan: see docs/architecture.md (Packages)."""
