"""The registry cache: layers and outputs a registry holds for other machines, whom it trusts, what it stands in for."""
