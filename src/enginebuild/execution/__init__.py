"""enginebuild.execution: see docs/architecture.md (Packages)."""
