"""Writing small images into a workspace copy for tests."""
from __future__ import annotations

import textwrap
from pathlib import Path

# An amd64 image FROM scratch whose components build on a busybox-only environment; add
# `components:` after it.
BUSYBOX_BUILDER = """base: scratch
platform: linux/amd64
builder:
  base: scratch
  system:
    install: extract
    packages: [busybox-static]
    run: [["/bin/busybox", "--install", "-s", "/bin"]]
"""

# An amd64 image FROM scratch with one component `units` (source folder units/, script
# units/build.sh) compiled through ccache, whose cache folder is /root/.ccache; outputs /opt/units.
CCACHE_UNITS = """base: scratch
platform: linux/amd64
builder:
  base: scratch
  system:
    install: extract
    packages: [busybox-static, gcc, libc6-dev, ccache]
    run: [["/bin/busybox", "--install", "-s", "/bin"]]
components:
  units:
    source: {path: units}
    build:
      script: units/build.sh
      cache: [/root/.ccache]
    outputs: {paths: [/opt/units]}
install: [units]
"""


def write_image(workspace: Path, name: str, spec: str, files: dict | None = None) -> Path:
    folder = workspace / "images" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "image.yaml").write_text(textwrap.dedent(spec).lstrip())
    for rel, content in (files or {}).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if rel.endswith(".sh"):
            path.chmod(0o755)
    return folder


def write_patch(workspace: Path, name: str, text: str) -> Path:
    path = workspace / "patches" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# a patch of the demo engine's Python part only (MARK: a marker the test puts in the setting's label)
PY_PATCH = """Subject: demo-engine: say where the model is mounted
Description: a patch of the engine's Python part only
Upstream: not forwarded (test)
---
--- a/py/engine_settings.py
+++ b/py/engine_settings.py
@@ -10,3 +10,3 @@
 SETTINGS = (
-    ("MODEL_PATH", "model folder", ""),
+    ("MODEL_PATH", "model folder (mounted) MARK", ""),
     ("SERVED_MODEL_NAME", "name served", "basename of MODEL_PATH"),
"""


# an image enginebuild writes every layer of itself (files over scratch): no builder, no network
FILES_ONLY_SPEC = textwrap.dedent("""
    base: scratch
    platform: linux/amd64
    env: {APP_HOME: /opt/app}
    entrypoint: [/opt/app/run.sh]
    labels: {org.example.recipe: fast-edit}
    files:
      /opt/app/run.sh: run.sh
      /opt/app/bin/: "scripts/*.sh"
      /etc/app/: conf/
      /etc/app-secret.conf: {src: secret.conf, mode: "0600"}
    """)
FILES_ONLY_FILES = {"run.sh": "#!/bin/sh\nexec serve\n", "scripts/a.sh": "#!/bin/sh\necho a\n",
                    "scripts/b.sh": "#!/bin/sh\necho b\n", "scripts/notes.txt": "not copied\n",
                    "conf/engine.json": "{}\n", "conf/models/qwen.json": "{\"tp\": 1}\n", "secret.conf": "k=v\n"}
