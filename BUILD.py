#!/usr/bin/env python3
"""enginebuild: declarative, locked, content-addressed container images for LLM engines."""
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "src"))

if __name__ == "__main__":
    from enginebuild.fastpath import answer  # a no-op or file-edit `image` answers before the CLI loads

    rest = answer(sys.argv[1:], ROOT)
    if rest == []:
        sys.exit(0)
    from enginebuild.cli import main

    sys.exit(main(rest or sys.argv[1:], root=ROOT))
