"""Rendering stage Dockerfiles from the templates folder, byte-identical for identical input."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

import jinja2

from enginebuild.quote import FILTERS


def _bytecode_cache():
    """Compiled templates kept between runs (keyed by template source), so a run need not lex them."""
    import os

    from enginebuild.home import home

    folder = home() / "jinja"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(folder)) if os.access(folder, os.W_OK) else None


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("enginebuild", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters.update(FILTERS)
    return env


def render(template: str, **values) -> str:
    return _environment().get_template(template).render(**values)


def templates_dir():
    from pathlib import Path

    return Path(__file__).resolve().parent / "templates"


def template_bytes(name: str) -> bytes:
    return resources.files("enginebuild").joinpath("templates", name).read_bytes()
