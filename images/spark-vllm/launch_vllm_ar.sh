#!/bin/sh
# The autoregressive baseline: the same launcher, without speculative decoding.
SPECULATION=off exec /opt/enginebuild/bin/launch_server.sh "$@"
