"""The content tag that `changed` and the CI job decide by names what is pushed: every layer and
the image's configuration. A change to env, labels, entrypoint, user, healthcheck or the
created time is a new image, whose tag is absent from the registry, so it is published."""
from __future__ import annotations

import pytest

from conftest import ROOT
from enginebuild.lock.lockfile import read_lock
from enginebuild.plan.image import Options, plan_image
from enginebuild.publish.changed import content_tag
from enginebuild.recipe.catalog import Catalog


def tag_of(overrides: tuple[str, ...] = (), compression: str = "gzip") -> str:
    spec = Catalog(ROOT).load("demo", overrides)
    plans = [plan_image(spec, read_lock(ROOT, spec), p, Options()) for p in spec.platforms]
    return content_tag(plans, compression)


def test_the_same_inputs_give_the_same_tag():
    assert tag_of() == tag_of()
    assert tag_of().startswith("sha-") and len(tag_of()) == 20


@pytest.mark.parametrize("override", ["env.DEMO_EXTRA=1", "labels[org.example.release]=rc1",
                                      "entrypoint=[\"/bin/sh\"]", "user=nobody", "workdir=/srv",
                                      "cmd=[\"--port\", \"9\"]"])
def test_a_change_to_the_config_alone_is_a_new_tag(override):
    before = tag_of()
    spec = Catalog(ROOT).load("demo", (override,))
    plain = Catalog(ROOT).load("demo")
    lock = read_lock(ROOT, plain)
    # the layers are the same: only the configuration differs
    assert [plan_image(spec, lock, p, Options()).runtime.tip for p in spec.platforms] == \
        [plan_image(plain, lock, p, Options()).runtime.tip for p in plain.platforms]
    assert tag_of((override,)) != before


def test_another_compression_has_its_own_tag():
    assert tag_of(compression="zstd") == tag_of() + "-zstd"
