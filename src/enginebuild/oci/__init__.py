"""enginebuild.oci: see docs/architecture.md (Packages)."""
