#!/bin/sh
# Packages demo-engine's Python part (py/, its declared inputs): no compiler runs here, so a
# patch that reaches only this part rebuilds this component alone. The files are installed as
# they are (a command on PATH runs them), so a patch of them is applied as files: the component
# is not built again for it (docs/patches.md).
set -eu
mkdir -p /opt/demo-engine/py /usr/local/bin
cp py/engine_settings.py /opt/demo-engine/py/engine_settings.py
printf '#!/bin/sh\nexec /usr/bin/python3 /opt/demo-engine/py/engine_settings.py "$@"\n' > /usr/local/bin/demo-engine-settings
chmod 0755 /usr/local/bin/demo-engine-settings
echo "packaged /opt/demo-engine/py, run by /usr/local/bin/demo-engine-settings"
