"""Resolvers turn floating references into pins: image digests, commits, file hashes."""
