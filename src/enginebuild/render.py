"""Rendering stage Dockerfiles from the templates folder, byte-identical for identical input."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

import jinja2

from enginebuild.quote import FILTERS


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("enginebuild", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
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
