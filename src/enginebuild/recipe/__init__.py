"""enginebuild.recipe: see docs/architecture.md (Packages)."""
