"""(being written)"""

from __future__ import annotations

import argparse

from enginebuild.errors import UserError
from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="*")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    raise UserError("reproduce is not available yet")
