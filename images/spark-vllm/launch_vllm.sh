#!/bin/sh
# enginebuild's vLLM launcher: builds the exact `vllm serve` command line from the runtime
# contract (environment variables set on `docker run`), prints it, and runs it.
#
#   MODEL_PATH (required)      model directory (mounted into the container)
#   SERVED_MODEL_NAME          default: basename of MODEL_PATH
#   HOST, PORT                 default: 0.0.0.0, 8000
#   MAX_MODEL_LEN, MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS, GPU_MEMORY_UTILIZATION
#   ATTENTION_BACKEND          flash_attn for DFlash (non-causal drafting)
#   LOAD_FORMAT                e.g. fastsafetensors
#   KV_CACHE_DTYPE             auto (BF16); never fp8 together with DFlash
#   DFLASH_DRAFTER             drafter model (path or id); empty: no speculative decoding
#   DFLASH_NUM_SPEC_TOKENS     default 15
#   SPECULATION=off            run autoregressively even when DFLASH_DRAFTER is set
#   THINK_KWARGS               JSON for --default-chat-template-kwargs
#   ENABLE_TURBOQUANT, TQ_*    TurboQuant settings, read by its start-up bootstrap
#   TENSOR_PARALLEL_SIZE, PIPELINE_PARALLEL_SIZE   over every GPU of every node
#   NNODES (1), NODE_RANK, MASTER_ADDR, MASTER_PORT (29500)   several nodes (set by `serve`): vLLM's
#                              own multi-node executor; a node of rank > 0 runs headless
#   DISTRIBUTED_BACKEND        mp (vLLM's own, default) or ray (a Ray cluster started beforehand)
#   LAUNCH_DRY_RUN=1           print the command line, one `arg: ` line per argument, and exit
#   VLLM_API_KEY               read by vLLM from the environment; never put on the command line
#   EXTRA_ARGS                 appended verbatim to `vllm serve`
set -eu

say() { echo "launch_server.sh: $*"; }
die() { echo "launch_server.sh: $*" >&2; exit 2; }
is_int() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
is_number() { case $1 in '' | *[!0-9.]* | *.*.*) return 1 ;; esac; }

[ -n "${MODEL_PATH:-}" ] || die "MODEL_PATH is not set: mount a model directory and set MODEL_PATH to it (docker run -v /models:/models -e MODEL_PATH=/models/NAME ...)"
[ -d "$MODEL_PATH" ] || die "MODEL_PATH=$MODEL_PATH is not a directory (is the model mounted?)"
[ -f "$MODEL_PATH/config.json" ] || die "MODEL_PATH=$MODEL_PATH has no config.json: not a model directory"

port=${PORT:-8000}
max_model_len=${MAX_MODEL_LEN:-65536}
max_num_seqs=${MAX_NUM_SEQS:-16}
max_batched=${MAX_NUM_BATCHED_TOKENS:-32768}
gpu_util=${GPU_MEMORY_UTILIZATION:-0.85}
spec_tokens=${DFLASH_NUM_SPEC_TOKENS:-15}
for pair in "PORT=$port" "MAX_MODEL_LEN=$max_model_len" "MAX_NUM_SEQS=$max_num_seqs" \
            "MAX_NUM_BATCHED_TOKENS=$max_batched" "DFLASH_NUM_SPEC_TOKENS=$spec_tokens"; do
    is_int "${pair#*=}" || die "${pair%%=*} must be a whole number, got '${pair#*=}'"
done
is_number "$gpu_util" || die "GPU_MEMORY_UTILIZATION must be a number such as 0.85, got '$gpu_util'"

served=${SERVED_MODEL_NAME:-$(basename "$MODEL_PATH")}
set -- vllm serve "$MODEL_PATH" \
    --served-model-name "$served" \
    --host "${HOST:-0.0.0.0}" --port "$port" \
    --max-model-len "$max_model_len" \
    --max-num-seqs "$max_num_seqs" \
    --max-num-batched-tokens "$max_batched" \
    --gpu-memory-utilization "$gpu_util"
if [ -n "${ATTENTION_BACKEND:-}" ]; then set -- "$@" --attention-backend "$ATTENTION_BACKEND"; fi
if [ -n "${LOAD_FORMAT:-}" ]; then set -- "$@" --load-format "$LOAD_FORMAT"; fi
kv=${KV_CACHE_DTYPE:-auto}
if [ "$kv" != auto ]; then set -- "$@" --kv-cache-dtype "$kv"; fi

# A ModelOpt NVFP4 checkpoint needs --quantization modelopt; vLLM detects compressed-tensors itself.
if [ -f "$MODEL_PATH/hf_quant_config.json" ] \
   || grep -Eq '"quant_method"[[:space:]]*:[[:space:]]*"modelopt"' "$MODEL_PATH/config.json"; then
    set -- "$@" --quantization modelopt
fi

if [ -n "${DFLASH_DRAFTER:-}" ] && [ "${SPECULATION:-on}" != off ]; then
    case $kv in fp8*) die "DFlash needs a BF16 KV cache: unset KV_CACHE_DTYPE (got $kv)" ;; esac
    case $DFLASH_DRAFTER in *[!A-Za-z0-9._/:-]*) die "DFLASH_DRAFTER may hold only letters, digits and ._/:- (got '$DFLASH_DRAFTER')" ;; esac
    if [ "${ATTENTION_BACKEND:-}" != flash_attn ]; then
        say "warning: DFlash is non-causal and is meant to run with ATTENTION_BACKEND=flash_attn"
    fi
    set -- "$@" --speculative-config \
        "{\"method\":\"dflash\",\"model\":\"$DFLASH_DRAFTER\",\"num_speculative_tokens\":$spec_tokens}"
fi
if [ -n "${THINK_KWARGS:-}" ]; then set -- "$@" --default-chat-template-kwargs "$THINK_KWARGS"; fi

if [ "${ENABLE_TURBOQUANT:-0}" = 1 ]; then
    case ${TQ_MODE:-hybrid} in off | capture_only | hybrid | full_tq) ;; *) die "TQ_MODE must be off, capture_only, hybrid or full_tq (got '$TQ_MODE')" ;; esac
    say "TurboQuant: mode=${TQ_MODE:-hybrid} key_bits=${TQ_KEY_BITS:-4} value_bits=${TQ_VALUE_BITS:-3} ring_capacity=${TQ_RING_CAPACITY:-128} initial_layers=${TQ_INITIAL_LAYERS:-4} (CUDA graphs stay on)"
fi
for pair in "TENSOR_PARALLEL_SIZE=${TENSOR_PARALLEL_SIZE:-}" "PIPELINE_PARALLEL_SIZE=${PIPELINE_PARALLEL_SIZE:-}"; do
    [ -z "${pair#*=}" ] && continue
    is_int "${pair#*=}" || die "${pair%%=*} must be a whole number, got '${pair#*=}'"
    flag=$(echo "${pair%%=*}" | tr 'A-Z_' 'a-z-')
    set -- "$@" "--$flag" "${pair#*=}"
done
nnodes=${NNODES:-1}
is_int "$nnodes" || die "NNODES must be a whole number, got '$nnodes'"
if [ "$nnodes" -gt 1 ]; then
    case ${DISTRIBUTED_BACKEND:-mp} in
        ray) set -- "$@" --distributed-executor-backend ray ;;
        mp)
            rank=${NODE_RANK:-0} master_port=${MASTER_PORT:-29500}
            is_int "$rank" || die "NODE_RANK must be a whole number, got '$rank'"
            is_int "$master_port" || die "MASTER_PORT must be a whole number, got '$master_port'"
            [ -n "${MASTER_ADDR:-}" ] || die "NNODES=$nnodes needs MASTER_ADDR, the head's address"
            case $MASTER_ADDR in *[!0-9A-Za-z.:-]*) die "MASTER_ADDR must be an address, got '$MASTER_ADDR'" ;; esac
            set -- "$@" --nnodes "$nnodes" --node-rank "$rank" --master-addr "$MASTER_ADDR" --master-port "$master_port"
            if [ "$rank" -gt 0 ]; then set -- "$@" --headless; fi ;;
        *) die "DISTRIBUTED_BACKEND must be mp or ray, got '$DISTRIBUTED_BACKEND'" ;;
    esac
fi
if [ -n "${VLLM_API_KEY:-}" ]; then say "API key: taken by vLLM from VLLM_API_KEY (not shown)"; fi

# EXTRA_ARGS carries extra options for `vllm serve`: splitting it on whitespace is the point.
# shellcheck disable=SC2086
set -- "$@" ${EXTRA_ARGS:-}
if [ "${LAUNCH_DRY_RUN:-0}" = 1 ]; then
    for arg in "$@"; do printf 'arg: %s\n' "$arg"; done
    exit 0
fi
say "$*"
exec "$@"
