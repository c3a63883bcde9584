"""Checks run in a built image: the patches' behaviour checks, the import check, the patched files read back."""
