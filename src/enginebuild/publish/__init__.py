"""Publishing: push records, and the SBOM and provenance attached to every push."""
