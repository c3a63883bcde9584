#!/bin/sh
# enginebuild's llama.cpp launcher: builds the exact `llama-server` command line from the
# runtime contract, prints it, and runs it.
#
#   MODEL_PATH (required)   a .gguf file, or a directory holding one (the first shard is used)
#   SERVED_MODEL_NAME       default: the file name without .gguf (and shard suffix)
#   HOST, PORT              default: 0.0.0.0, 8012
#   CTX_SIZE (65536), N_GPU_LAYERS (999), PARALLEL (1), FLASH_ATTN (on|off|auto; unset: the default)
#   SPEC_TYPE               n-gram speculation: ngram-simple (default), another llama.cpp spec type, or off
#   DRAFT_MAX (64), DRAFT_MIN (unset)   the longest (shortest) draft: --spec-ngram-simple-size-m
#                           (and the like per n-gram kind) or --spec-draft-n-max/-min, or --draft-max/-min
#                           for a llama-server older than the rename
#   RPC_SERVERS             HOST:PORT,... of llama.cpp rpc-servers (other nodes, set by `serve`): the
#                           offloaded layers (N_GPU_LAYERS) go to them (--rpc)
#   LAUNCH_DRY_RUN=1        print the command line, one `arg: ` line per argument, and exit
#   LLAMA_ARG_API_KEY       read by llama-server from the environment; never on the command line
#   EXTRA_ARGS              appended verbatim to `llama-server`
set -eu

say() { echo "launch_server.sh: $*"; }
die() { echo "launch_server.sh: $*" >&2; exit 2; }
is_int() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }

[ -n "${MODEL_PATH:-}" ] || die "MODEL_PATH is not set: mount a GGUF model and set MODEL_PATH to the file or its folder"
if [ -d "$MODEL_PATH" ]; then
    gguf=$(find "$MODEL_PATH" -maxdepth 1 -name '*.gguf' | sort | head -n 1)
    [ -n "$gguf" ] || die "MODEL_PATH=$MODEL_PATH holds no .gguf file"
elif [ -f "$MODEL_PATH" ]; then
    case $MODEL_PATH in *.gguf) gguf=$MODEL_PATH ;; *) die "MODEL_PATH=$MODEL_PATH is not a .gguf file" ;; esac
else
    die "MODEL_PATH=$MODEL_PATH does not exist (is the model mounted?)"
fi

port=${PORT:-8012}
ctx=${CTX_SIZE:-65536}
ngl=${N_GPU_LAYERS:-999}
parallel=${PARALLEL:-1}
draft_max=${DRAFT_MAX:-64}
for pair in "PORT=$port" "CTX_SIZE=$ctx" "N_GPU_LAYERS=$ngl" "PARALLEL=$parallel" "DRAFT_MAX=$draft_max"; do
    is_int "${pair#*=}" || die "${pair%%=*} must be a whole number, got '${pair#*=}'"
done
name=$(basename "$gguf" .gguf)
name=${name%-00001-of-*}
served=${SERVED_MODEL_NAME:-$name}

set -- llama-server -m "$gguf" --alias "$served" --host "${HOST:-0.0.0.0}" --port "$port" \
    -c "$ctx" -ngl "$ngl" -np "$parallel"
if [ -n "${FLASH_ATTN:-}" ]; then set -- "$@" --flash-attn "$FLASH_ATTN"; fi
spec=${SPEC_TYPE:-ngram-simple}
if [ "$spec" != off ]; then
    # llama.cpp replaced --draft-max/--draft-min (and refuses them now) by one length per kind
    # of speculation: ask the binary which flags it takes, and name DRAFT_MAX/MIN in its words
    help=$(llama-server --help 2>/dev/null || true)
    takes() { case $help in *"$1 "*) return 0 ;; esac; return 1; }
    if takes --spec-draft-n-max; then
        max_flag=--spec-draft-n-max min_flag=--spec-draft-n-min
        first=${spec%%,*}  # the first kind listed drafts the tokens
        case $first in
            ngram-simple | ngram-map-k | ngram-map-k4v) takes "--spec-$first-size-m" && max_flag=--spec-$first-size-m ;;
            ngram-mod) takes --spec-ngram-mod-n-max && max_flag=--spec-ngram-mod-n-max min_flag=--spec-ngram-mod-n-min ;;
        esac
    else
        max_flag=--draft-max min_flag=--draft-min
    fi
    set -- "$@" --spec-type "$spec" "$max_flag" "$draft_max"
    if [ -n "${DRAFT_MIN:-}" ]; then
        is_int "$DRAFT_MIN" || die "DRAFT_MIN must be a whole number, got '$DRAFT_MIN'"
        set -- "$@" "$min_flag" "$DRAFT_MIN"
    fi
fi
if [ -n "${RPC_SERVERS:-}" ]; then
    case $RPC_SERVERS in *[!0-9A-Za-z.:,\[\]-]*) die "RPC_SERVERS must be HOST:PORT,... (got '$RPC_SERVERS')" ;; esac
    set -- "$@" --rpc "$RPC_SERVERS"
fi
if [ -n "${LLAMA_ARG_API_KEY:-}" ]; then say "API key: taken by llama-server from LLAMA_ARG_API_KEY (not shown)"; fi
# EXTRA_ARGS carries extra options for llama-server: splitting it on whitespace is the point.
# shellcheck disable=SC2086
set -- "$@" ${EXTRA_ARGS:-}
if [ "${LAUNCH_DRY_RUN:-0}" = 1 ]; then
    for arg in "$@"; do printf 'arg: %s\n' "$arg"; done
    exit 0
fi
say "$*"
exec "$@"
