"""Options several verbs share, defined once: how a push compresses layers, and the registry cache."""

from __future__ import annotations

import argparse


def add_compression_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compression", choices=["gzip", "gzip-isal", "zstd"], default="gzip",
                        help="how the layers enginebuild made are compressed: gzip (default, zlib level 6), gzip-isal "
                             "(gzip made by ISA-L: ~10x faster, ~14%% larger; every consumer reads both) or zstd "
                             "(Docker 23+, containerd 1.5+); deterministic every way")


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", metavar="REGISTRY/REPO",
                        help="registry-backed cache: take outputs and layers found there, push what is built here "
                             "(default: $ENGINEBUILD_CACHE, or cache.repository in enginebuild.yaml)")
    parser.add_argument("--no-registry-cache", action="store_true", help="ignore any configured registry cache")
    parser.add_argument("--cache-readonly", action="store_true", help="pull from the cache, never push to it")
