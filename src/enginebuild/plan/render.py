"""Rendering Dockerfiles from the templates folder, byte-identical for identical input.

Templates never interpolate a value raw: every value goes through a filter of quote.py.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from enginebuild.plan.quote import FILTERS

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).resolve().parent / "templates"
TemplateValues = dict[str, object]  # what a template is rendered with (named values for its placeholders)


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             autoescape=False, keep_trailing_newline=True)
    env.filters.update(FILTERS)
    return env


def render(template: str, **values: object) -> str:
    return _environment().get_template(template).render(**values)
