#!/usr/bin/env python3
"""enginebuild: declarative, locked, content-addressed container images for LLM engines."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

from enginebuild.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], root=os.path.dirname(os.path.abspath(__file__))))
