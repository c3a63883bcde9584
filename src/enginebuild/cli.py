"""Command line: parse, dispatch to one small function per verb, turn errors into exit codes."""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path

from enginebuild.errors import EXIT_BAD_INPUT, EXIT_FAILED, EngineBuildError

VERBS = {
    "list": ("list_", "list the images of the catalogue"),
    "render": ("render", "print (or write out) the Dockerfile of every stage of an image"),
    "plan": ("plan", "show every stage, its key, whether it exists and what changed"),
    "lock": ("lock", "resolve floating inputs into lockfiles/<image>.lock, or --check them"),
    "fetch": ("fetch", "download and verify every pinned input of an image into the store"),
    "image": ("image", "build an image: only the stages whose inputs changed"),
    "push": ("push", "push a built image and record its digest"),
    "patches": ("patches", "check patch stacks against the engine sources they apply to"),
}


class Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors: exit 2 with the usage line, no traceback
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="BUILD.py", description="enginebuild: hermetic, content-addressed builds of LLM "
                                                  "serving images (vLLM, llama.cpp) for NVIDIA DGX Spark.")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    sub.required = True
    for verb, (module, help_text) in VERBS.items():
        mod = importlib.import_module(f"enginebuild.commands.{module}")
        p = sub.add_parser(verb, help=help_text, description=(mod.__doc__ or help_text).strip())
        mod.add_arguments(p)
        p.set_defaults(run=mod.run)
    return parser


def main(argv, root=".") -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from enginebuild.workspace import Workspace

    workspace = Workspace(Path(root).resolve())
    try:
        return int(args.run(args, workspace) or 0)
    except EngineBuildError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_FAILED
    except Exception:  # a bug in enginebuild, not the user's input: show everything
        print("internal error in enginebuild (please report it):", file=sys.stderr)
        traceback.print_exc()
        return EXIT_FAILED
