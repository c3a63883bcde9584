#!/bin/sh
# Packages demo-engine's Python part (py/, its declared inputs): no compiler runs here, so a
# patch that reaches only this part rebuilds this component alone. The files are installed as
# they are (a command on PATH links to them), so a patch of them is applied as files: the
# component is not built again for it (docs/patches.md).
set -eu
mkdir -p /opt/demo-engine/py /usr/local/bin
cp py/engine_settings.py /opt/demo-engine/py/engine_settings.py
chmod 0755 /opt/demo-engine/py/engine_settings.py
ln -s /opt/demo-engine/py/engine_settings.py /usr/local/bin/demo-engine-settings
echo "packaged /opt/demo-engine/py, linked from /usr/local/bin/demo-engine-settings"
