"""The image config's settings are declared once (core/imagesettings.py): the spec's field, the
config's key, how the image's value lays over its base's, and the Dockerfile form `render` writes.
These tests hold the table to the spec model and to Docker's semantics."""

import dataclasses

from enginebuild.core.imagesettings import SETTINGS, kept, laid_over, of_base
from enginebuild.plan.model import ImageSettings
from enginebuild.plan.views import FORMS, settings_lines
from enginebuild.recipe.model import Healthcheck, ImageSpec

BASE = {"Env": ["PATH=/usr/bin", "LANG=C.UTF-8"], "Labels": {"vendor": "base", "old": "x"},
        "ExposedPorts": {"80/tcp": {"odd": 1}}, "Entrypoint": ["/base-entry"], "Cmd": ["--base"],
        "WorkingDir": "/base", "User": "base", "StopSignal": "SIGTERM", "Volumes": {"/data": {}}}


def test_every_setting_is_a_field_of_the_spec_and_has_a_form_render_writes():
    fields = {f.name for f in dataclasses.fields(ImageSpec)}
    assert [s.field for s in SETTINGS if s.field not in fields] == []
    assert [s.form for s in SETTINGS if s.form not in FORMS] == []
    assert len({s.key for s in SETTINGS}) == len(SETTINGS) == len({s.field for s in SETTINGS})


def test_the_base_keeps_only_the_settings_the_table_declares_and_its_ports_are_read_as_docker_reads_them():
    assert set(of_base(BASE)) == set(BASE) - {"Volumes"}
    assert of_base(BASE)["ExposedPorts"] == {"80/tcp": {}}


def test_an_image_that_sets_nothing_keeps_its_bases_settings():
    given = {s.field: None for s in SETTINGS} | {"env": (), "labels": {}, "expose": ()}
    assert laid_over(of_base(BASE), given) == of_base(BASE)


def test_the_images_settings_lay_over_its_bases_as_a_dockerfile_would():
    check = Healthcheck(("CMD", "curl", "-f", "http://127.0.0.1:8000/health"), "30s", "5s", "2m", 3)
    given = {"env": (("LANG", "en_US.UTF-8"), ("PORT", "8000")), "labels": {"title": "mine"},
             "expose": ("8000/tcp",), "workdir": "/srv", "user": "", "shell": None, "stopsignal": "SIGINT",
             "healthcheck": check, "entrypoint": ("/serve",), "cmd": None}
    config = laid_over(of_base(BASE), given, removed=("old",))
    assert config["Env"] == ["PATH=/usr/bin", "LANG=en_US.UTF-8", "PORT=8000"]
    assert config["Labels"] == {"vendor": "base", "title": "mine"}  # `old` removed (`labels: {old: null}`)
    assert config["ExposedPorts"] == {"80/tcp": {}, "8000/tcp": {}}
    assert (config["WorkingDir"], config["User"], config["StopSignal"]) == ("/srv", "base", "SIGINT")
    assert config["Entrypoint"] == ["/serve"] and "Cmd" not in config  # a new entrypoint resets the base's cmd
    assert config["Healthcheck"] == {"Test": ["CMD", "curl", "-f", "http://127.0.0.1:8000/health"],
                                     "Interval": 30_000_000_000, "Timeout": 5_000_000_000,
                                     "StartPeriod": 120_000_000_000, "Retries": 3}
    # a cmd alone replaces the base's and leaves its entrypoint; an empty one is still a cmd
    config = laid_over(of_base(BASE), {**given, "entrypoint": None, "cmd": ()})
    assert (config["Entrypoint"], config["Cmd"]) == (["/base-entry"], [])
    assert kept(config)["Cmd"] == [] and "Shell" not in kept({**config, "Shell": None, "WorkingDir": ""})


def test_render_writes_each_setting_in_the_tables_order_with_its_form():
    settings = ImageSettings({"env": (("A", 'say "hi" $HOME'),), "labels": {"b": "2", "a": "1"},
                              "expose": ("8000/tcp", "9000/udp"), "workdir": "/srv", "user": "1000",
                              "shell": ("/bin/bash", "-c"), "stopsignal": "SIGINT",
                              "healthcheck": Healthcheck(("NONE",), None, None, None, None),
                              "entrypoint": ("/serve",), "cmd": ("--port", "8000")},
                             env_note="a note", labels_removed=("old",))
    assert settings_lines(settings) == [
        "# a note", 'ENV A="say \\"hi\\" \\$HOME"', 'LABEL "a"="1" "b"="2"',
        "# label old removed by enginebuild: a Dockerfile cannot remove a base's label (LABEL sets it)",
        "EXPOSE 8000", "EXPOSE 9000/udp", "WORKDIR /srv", "USER 1000", 'SHELL ["/bin/bash", "-c"]',
        "STOPSIGNAL SIGINT", "HEALTHCHECK NONE", 'ENTRYPOINT ["/serve"]', 'CMD ["--port", "8000"]']
