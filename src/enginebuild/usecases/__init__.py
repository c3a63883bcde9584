"""Use cases: what the verbs do, with typed requests; `commands/` only parses arguments and prints."""
