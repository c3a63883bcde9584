#!/bin/sh
# enginebuild: apply an ordered patch stack to a tree, strictly, in the order given.
# Usage: apply_patches.sh TARGET_DIR PATCH...   (patch files live beside this script)
# Stops at the first patch that does not apply, naming it; never skips one.
set -eu
target=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
cd "$target"
if command -v git >/dev/null 2>&1; then
    tool=git
elif patch --version 2>/dev/null | grep -q "GNU patch"; then
    tool=gnu
else
    tool=busybox
fi
log=$(mktemp)
for name in "$@"; do
    file="$here/$name"
    case $tool in
        git) git apply --check -p1 "$file" >"$log" 2>&1 && git apply -p1 "$file" >>"$log" 2>&1 ;;
        gnu) patch -p1 -F0 -N --batch --dry-run -i "$file" >"$log" 2>&1 && patch -p1 -F0 -N --batch -i "$file" >>"$log" 2>&1 ;;
        busybox) patch -p1 --dry-run -i "$file" >"$log" 2>&1 && patch -p1 -i "$file" >>"$log" 2>&1 ;;
    esac || {
        echo "enginebuild: patch $name does not apply to $target ($tool):" >&2
        sed 's/^/    /' "$log" >&2
        rm -f "$log"
        exit 1
    }
    echo "enginebuild: applied $name to $target"
done
rm -f "$log"
