#!/bin/sh
# Packages demo-engine's Python part (py/, its declared inputs): no compiler runs here, so a
# patch that reaches only this part rebuilds this component alone.
set -eu
mkdir -p /usr/local/bin
cp py/engine_settings.py /usr/local/bin/demo-engine-settings
chmod 0755 /usr/local/bin/demo-engine-settings
echo "packaged /usr/local/bin/demo-engine-settings"
