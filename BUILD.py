#!/usr/bin/env python3
"""enginebuild: declarative, locked, content-addressed container images for LLM engines."""
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "src"))

if __name__ == "__main__":
    from enginebuild.fastpath import answer_noop  # a no-op `image` answers before the CLI loads

    if answer_noop(sys.argv[1:], ROOT):
        sys.exit(0)
    from enginebuild.cli import main

    sys.exit(main(sys.argv[1:], root=ROOT))
