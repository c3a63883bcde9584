"""Command line: parse, dispatch to one small function per verb, turn errors into exit codes."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import importlib
import re
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from enginebuild.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED, EngineBuildError
from enginebuild.io.files import disk_full

if TYPE_CHECKING:
    from enginebuild.oci.engine import EngineApi
    from enginebuild.oci.registry import RegistryApi
    from enginebuild.workspace import Workspace

VERBS = {
    "list": ("list_", "list the images of the catalogue"),
    "lock": ("lock", "resolve floating inputs into lockfiles/<image>.lock, or --check them"),
    "plan": ("plan", "show every component and layer, its key, whether it exists and what changed"),
    "render": ("render", "print (or write out) the Dockerfiles of an image"),
    "fetch": ("fetch", "download and verify every pinned input of an image into the store"),
    "image": ("image", "build an image: only what changed"),
    "push": ("push", "push a built image (every platform) and record its digest"),
    "changed": ("changed", "name the images a registry does not hold at their current inputs"),
    "patches": ("patches", "check patch stacks against the sources they apply to"),
    "serve": ("serve", "serve one image on several nodes (vLLM multi-node, llama.cpp RPC), every failure named"),
    "sign": ("sign", "sign images already pushed, by digest (the CI job that alone holds id-token: write)"),
    "verify": ("verify", "check the CUDA kernel architectures of an image's binaries"),
    "reproduce": ("reproduce", "rebuild an image from its lock and compare it layer by layer"),
    "doctor": ("doctor", "check this machine for what enginebuild needs"),
    "gc": ("gc", "remove stored blobs, records and engine tags no image needs (--dry-run shows them)"),
    "schema": ("schema", "print the JSON Schema of image.yaml"),
}


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors: exit 2 with the usage line, no traceback
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        wrong = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if wrong:  # a mistyped verb, action or choice
            close = difflib.get_close_matches(wrong.group(1), re.findall(r"'([^']*)'", wrong.group(2)), n=1)
            if close:
                print(f"  hint: did you mean {close[0]!r}?", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


PROGRESS = ("auto", "plain", "tty", "quiet")


# -- --version: the version and the commit it was installed from ------------------------------
# (a source checkout: its HEAD, and whether src/ has edits; `pip install git+URL@COMMIT`: the commit
# pip recorded in PEP 610's direct_url.json; a release install: its version alone)

def _installed_commit() -> str | None:
    import json
    from importlib import metadata

    try:
        text = metadata.distribution("enginebuild").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    try:
        info = json.loads(text or "{}")
    except ValueError:
        return None
    commit = (info.get("vcs_info") or {}).get("commit_id") if isinstance(info, dict) else None
    return commit if isinstance(commit, str) and len(commit) == 40 else None


def _checkout_commit() -> str | None:
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists() or not (root / "BUILD.py").is_file():
        return None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "src"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = head.stdout.strip()
    if head.returncode != 0 or len(commit) != 40:
        return None
    return commit + (" with local edits" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def version_line() -> str:
    from enginebuild import __version__

    commit = _checkout_commit() or _installed_commit()
    return f"enginebuild {__version__}" + (f" (commit {commit})" if commit else "")


class _Version(argparse.Action):
    """--version: read when asked (the commit needs git or the install's metadata), not on every run."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    from enginebuild.errors import command

    prog = "BUILD.py" if command() == "python BUILD.py" else command()
    parser = Parser(prog=prog, description="enginebuild: hermetic, content-addressed builds of LLM serving images "
                                           "(vLLM, llama.cpp) for NVIDIA DGX Spark.")
    parser.add_argument("--version", action=_Version, nargs=0, help="the version, and the commit it was installed from")
    parser.add_argument("-q", "--quiet", action="store_true", help="print results only, no progress")
    parser.add_argument("--progress", choices=PROGRESS, default=None,
                        help="as Docker's: auto (a live line on a terminal), plain (one line at a time, as in CI), "
                             "tty (live even when piped), quiet (= -q)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE", dest="overrides",
                        help="override a spec value for this run only (never written to a lock)")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    sub.required = True
    for verb, (module, help_text) in VERBS.items():
        mod = importlib.import_module(f"enginebuild.commands.{module}")
        # each verb's description is written as it is shown (its lists and examples line by line)
        p = sub.add_parser(verb, help=help_text, description=(mod.__doc__ or help_text).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        _global_options(p)
        p.set_defaults(run=mod.run, parser=p)
    return parser


def _global_options(p: argparse.ArgumentParser, where: str = "here") -> None:
    """The global options, also after the verb (`image demo -q --set …`) and after a verb's action
    (`patches check demo --progress plain`), as Docker takes them; each place keeps its own values
    (`main` joins them: an action's parser would otherwise replace what was given before it)."""
    p.add_argument("-q", "--quiet", action="store_true", dest=f"quiet_{where}", help="print results only, no progress")
    p.add_argument("--progress", choices=PROGRESS, default=None, dest=f"progress_{where}",
                   help="auto, plain, tty or quiet (as Docker's --progress)")
    p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE", dest=f"overrides_{where}",
                   help="override a spec value for this run only (never written to a lock)")
    for action in p._actions:  # a verb's actions (`patches check`): argparse gives no public way to them
        if isinstance(action, argparse._SubParsersAction):
            for nested in dict.fromkeys(action.choices.values()):
                _global_options(nested, "action")


def main(argv: list[str], root: str = ".", docker: EngineApi | None = None,
         registries: RegistryApi | None = None) -> int:
    """One command. `docker` and `registries`: the engine and the registry client it works with
    (None: this machine's engine, the registries' own APIs); tests pass ones in memory."""
    from enginebuild.io import interrupt, progress

    interrupt.install()
    if argv[:1] == ["help"]:  # `help` and `help VERB`, as git and docker take them
        argv = [*argv[1:2], "--help"]
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the verb's own usage, not the top level's
        args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    mode = getattr(args, "progress_action", None) or args.progress_here or args.progress or "auto"
    args.quiet = args.quiet or args.quiet_here or getattr(args, "quiet_action", False) or mode == "quiet"
    args.overrides = [*args.overrides, *args.overrides_here, *getattr(args, "overrides_action", [])]
    progress.configure(quiet=args.quiet, live={"plain": False, "tty": True}.get(mode))
    from enginebuild.workspace import Workspace

    workspace = Workspace(Path(root).resolve(), tuple(args.overrides), docker=docker, registries=registries)
    code = EXIT_FAILED
    try:
        from enginebuild.io.store import Store

        with contextlib.ExitStack() as held:
            try:  # gc waits for builds, and they for it; a dry run removes nothing and waits for nobody
                collecting = args.verb == "gc" and not getattr(args, "dry_run", False)
                held.enter_context(Store(workspace.home).using(collecting=collecting))
            except OSError:  # a home this user cannot write: nothing here writes the store either
                if args.verb == "gc":
                    raise
            code = _dispatch(args, workspace)
        return code
    finally:
        if code != 0:  # stopped by an error or a signal: a worker stopped mid-write leaves its partial file
            with contextlib.suppress(Exception):
                workspace.sweep(own=True)


def _dispatch(args: argparse.Namespace, workspace: Workspace) -> int:
    from enginebuild.io import interrupt

    try:
        return int(args.run(args, workspace) or 0)
    except EngineBuildError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted: what was in progress was cancelled and its temporary files removed", file=sys.stderr)
        return EXIT_INTERRUPTED
    except interrupt.Terminated:
        print("terminated: what was in progress was cancelled and its temporary files removed", file=sys.stderr)
        return EXIT_TERMINATED
    except BrokenPipeError:
        return EXIT_FAILED
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            return internal_error()
        # every writer removes its partial file as the error passes (see io/files.py)
        where = exc.filename or workspace.home
        print(disk_full(Path(where), exc).render(), file=sys.stderr)
        return EXIT_FAILED
    except Exception:  # a bug in enginebuild, not the user's input: show everything
        return internal_error()


def internal_error() -> int:
    """A bug in enginebuild, not the user's input: show everything."""
    print("internal error in enginebuild (please report it):", file=sys.stderr)
    traceback.print_exc()
    return EXIT_FAILED


# verbs that need no recipe repository
# verbs that need no recipe repository: they read an image from its registry by digest, this
# machine, or nodes named on the command line (a Spark that only pulls images has no checkout)
ANYWHERE = {"doctor", "schema", "sign", "serve"}


def _anywhere(verb: str, argv: list[str]) -> bool:
    return verb in ANYWHERE or (verb == "verify" and "--signature" in argv)


def recipe_root(start: Path) -> Path | None:
    """The recipe repository `start` is in: the nearest folder, `start` or above it, holding
    enginebuild.yaml or an images/ folder."""
    for folder in (start, *start.parents):
        if (folder / "enginebuild.yaml").is_file() or (folder / "images").is_dir():
            return folder
    return None


def _verb(argv: list[str]) -> str | None:
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--set":
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def console(name: str | None = "enginebuild", docker: EngineApi | None = None,
            registries: RegistryApi | None = None) -> None:
    """The `enginebuild` command (pip install): `python BUILD.py` of the recipe repository the
    current folder is in, found by walking up to enginebuild.yaml or images/. `docker` and
    `registries` as main's."""
    import os

    from enginebuild.errors import set_command
    from enginebuild.fastpath import answer

    if name:
        set_command(name)
    argv = sys.argv[1:]
    root = recipe_root(Path(os.getcwd()))
    verb = _verb(argv)
    if root is None:
        if verb is not None and not _anywhere(verb, argv) and not {"-h", "--help", "--version"} & set(argv):
            print(f"error: no recipe repository here: neither enginebuild.yaml nor an images/ folder in "
                  f"{os.getcwd()} or any folder above it\n"
                  "  hint: run enginebuild inside a recipe repository (images/NAME/image.yaml), or create "
                  "enginebuild.yaml at its top", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        root = Path(os.getcwd())
    rest = answer(argv, str(root), docker)
    if rest == []:
        sys.exit(0)
    sys.exit(main(rest or argv, root=str(root), docker=docker, registries=registries))
