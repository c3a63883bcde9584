"""Who signs and whom enginebuild trusts, in one place: key material read from files and
variables (keymaterial.py), the registry cache's Ed25519 keys and the signatures of its entries
(cachetrust.py), image signing's P-256 keys (signkeys.py)."""
