#!/usr/bin/python3
"""demo-engine-settings: the engine's Python part. Prints the settings the launcher hands to
demo-engine (from the same environment variables) as a table, so a user can see what a
container will serve before starting it."""
import os
import sys

from tabulate import tabulate

SETTINGS = (
    ("MODEL_PATH", "model folder", ""),
    ("SERVED_MODEL_NAME", "name served", "basename of MODEL_PATH"),
    ("PORT", "port", "8000"),
    ("DRAFTER_LAYER_IDS", "drafter's target layer ids", "none"),
    ("EXTRA_ARGS", "extra engine options", "none"),
)


def main() -> int:
    rows = [(name, meaning, os.environ.get(name) or f"({default})" if default else os.environ.get(name, ""))
            for name, meaning, default in SETTINGS]
    print(tabulate(rows, headers=("variable", "meaning", "value")))
    return 0 if os.environ.get("MODEL_PATH") else 2


if __name__ == "__main__":
    sys.exit(main())
