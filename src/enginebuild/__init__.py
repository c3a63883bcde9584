"""enginebuild: declarative, locked, content-addressed container images for LLM engines."""

__version__ = "0.1.0"
