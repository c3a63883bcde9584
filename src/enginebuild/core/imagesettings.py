"""The image config's settings, declared once. Each row names the spec's field that sets it
(recipe/model.py `ImageSpec`, and the plan's `ImageSettings` by the same name), its key in the
config's `config` object, the value it takes there, how the image's value lays over its base's
(Dockerfile semantics), when the config keeps it, and the Dockerfile instruction `render` shows it
as (the instruction's form: plan/views.py). The plan carries the spec's values, the image config
is made from them (oci/image.py), `render` writes them: a new setting is a row here and its key on
the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from enginebuild.wire import JsonDoc


def _given(value: object) -> bool:
    return value is not None


def _truthy(value: object) -> bool:
    return bool(value)


def _always(value: object) -> bool:
    return True


def _as_list(base: object, value: object) -> object:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value


def _env_over(base: object, pairs: object) -> object:
    """The image's variables after the base's and the chain's (which its commands saw)."""
    merged = dict(str(item).split("=", 1) for item in _items(base) if "=" in str(item))
    merged.update(dict(_pairs(pairs)))
    return [f"{k}={v}" for k, v in merged.items()]


def _labels_over(base: object, labels: object) -> object:
    return {**(base if isinstance(base, dict) else {}), **(labels if isinstance(labels, dict) else {})}


def _union_of_keys(base: object, names: object) -> object:
    """A set as the config writes one (ExposedPorts: {"8000/tcp": {}}): the base's and the image's."""
    return {name: {} for name in sorted({*(base if isinstance(base, dict) else {}), *_items(names)})}


def _keys_of_base(base: object) -> object:
    return {name: {} for name in sorted(str(key) for key in _items(base))}


class Healthcheck(Protocol):
    """What a spec's healthcheck says (recipe/model.py): durations as written (30s, 1m)."""

    test: tuple[str, ...]
    interval: str | None
    timeout: str | None
    start_period: str | None
    retries: int | None


def _healthcheck(base: object, value: object) -> object:
    """A spec's healthcheck as the config says it (durations in nanoseconds)."""
    check = cast(Healthcheck, value)
    doc: JsonDoc = {"Test": list(check.test)}
    for text, name in ((check.interval, "Interval"), (check.timeout, "Timeout"), (check.start_period, "StartPeriod")):
        if text:
            doc[name] = duration_ns(text)
    if check.retries is not None:
        doc["Retries"] = check.retries
    return doc


def duration_ns(text: str) -> int:
    units = {"ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * units[suffix]
    return int(text)


def _items(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple, dict)) else []


def _pairs(value: object) -> list[tuple[str, str]]:
    return [(str(pair[0]), str(pair[1])) for pair in _items(value) if isinstance(pair, (list, tuple)) and len(pair) == 2]


@dataclass(frozen=True)
class Setting:
    field: str  # the spec's field (ImageSpec) and the plan's name for it (ImageSettings)
    key: str  # its key in the image config's `config`
    instruction: str  # the Dockerfile instruction `render` writes it with
    form: str  # how that instruction is written (plan/views.py FORMS)
    sets: Callable[[object], bool] = _truthy  # whether the spec's value sets it (else the base's stays)
    over: Callable[[object, object], object] = _as_list  # (the base's value or None, the spec's) -> the config's
    kept: Callable[[object], bool] = _truthy  # whether the config holds the key with this value
    of_base: Callable[[object], object] | None = None  # how a base's value is read (None: as it is)
    resets: tuple[str, ...] = ()  # keys of the base's that setting this one drops (ENTRYPOINT resets CMD)


# in the order `render` writes them
SETTINGS: tuple[Setting, ...] = (
    Setting("env", "Env", "ENV", "pairs", over=_env_over, kept=_always),
    Setting("labels", "Labels", "LABEL", "labels", sets=_always, over=_labels_over),
    Setting("expose", "ExposedPorts", "EXPOSE", "ports", sets=_always, over=_union_of_keys, of_base=_keys_of_base),
    Setting("workdir", "WorkingDir", "WORKDIR", "word"),
    Setting("user", "User", "USER", "word"),
    Setting("shell", "Shell", "SHELL", "exec"),
    Setting("stopsignal", "StopSignal", "STOPSIGNAL", "word"),
    Setting("healthcheck", "Healthcheck", "HEALTHCHECK", "healthcheck", sets=_given, over=_healthcheck),
    Setting("entrypoint", "Entrypoint", "ENTRYPOINT", "exec", sets=_given, kept=_given, resets=("Cmd",)),
    Setting("cmd", "Cmd", "CMD", "exec", sets=_given, kept=_given),
)
BY_KEY = {s.key: s for s in SETTINGS}


def of_base(config: JsonDoc) -> JsonDoc:
    """The settings of a base's config that an image's config carries on (the table's keys)."""
    out: JsonDoc = {}
    for setting in SETTINGS:
        if setting.key in config:
            value = config[setting.key]
            out[setting.key] = setting.of_base(value) if setting.of_base else value
    return out


def laid_over(config: JsonDoc, given: dict[str, object], removed: tuple[str, ...] = ()) -> JsonDoc:
    """The image's own settings (`given`, by field) over its base's `config`; `removed`: the base's
    labels the image drops."""
    out = dict(config)
    for setting in SETTINGS:
        value = given.get(setting.field)
        if not setting.sets(value):
            continue
        for key in setting.resets:
            out.pop(key, None)
        out[setting.key] = setting.over(out.get(setting.key), value)
    if removed and isinstance(out.get("Labels"), dict):
        out["Labels"] = {k: v for k, v in out["Labels"].items() if k not in removed}
    return out


def kept(config: JsonDoc) -> JsonDoc:
    """What the config document holds of these settings."""
    return {k: v for k, v in config.items() if k in BY_KEY and BY_KEY[k].kept(v)}
