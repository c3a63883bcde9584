"""CUDA kernel architectures: what device code a binary carries, and whether it is what the spec declares."""
