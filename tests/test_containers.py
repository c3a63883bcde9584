"""The catalogue's launchers in real containers: each recipe's last stage built on a stand-in
base whose `vllm` and `llama-server` record their argv and environment and answer HTTP."""
import json
import shutil
import uuid

import pytest

from conftest import ROOT, run_cli
from helpers.docker import docker

pytestmark = [pytest.mark.docker, pytest.mark.network]

RECIPES = ["qwen36-dflash", "qwen35-dflash", "qwen35-dflash-turboquant", "qwen3-coder-next-dflash",
           "vllm-prefill", "llamacpp-minimax-ngram"]
SENTINEL = "sentinel-api-key-7f3a9c"


@pytest.fixture(scope="module")
def standin(docker_engine, registry, debian_reachable, tmp_path_factory):
    workspace = tmp_path_factory.mktemp("standin-repo")
    for part in ("images", "patches", "lockfiles"):
        shutil.copytree(ROOT / part, workspace / part)
    shutil.copytree(ROOT / "tests/standin", workspace / "images/standin")
    assert run_cli(["lock", "standin"], workspace).returncode == 0
    proc = run_cli(["image", "standin"], workspace)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(["push", "standin", "--to", f"{registry.host}/enginebuild-test/standin", "--tag", "1"], workspace)
    assert proc.returncode == 0, proc.stderr
    return workspace, proc.stdout.splitlines()[0]


@pytest.fixture(scope="module")
def recipes(standin):
    workspace, ref = standin
    tags = {}
    for name in RECIPES:
        proc = run_cli(["image", name, "--on", ref, "--platform", "linux/amd64"], workspace)
        assert proc.returncode == 0, proc.stderr
        tags[name] = proc.stdout.split("-> ")[-1].strip()
    return tags


class Served:
    def __init__(self, tag, env):
        self.name = f"eb-{uuid.uuid4().hex[:10]}"
        args = []
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        docker("run", "-d", "--name", self.name, *args, tag)

    def __enter__(self):
        port = "8012" if "llamacpp" in self.name else None
        waited = docker("exec", self.name, "/opt/enginebuild/bin/wait_for_server.sh",
                        f"http://127.0.0.1:{port or self.port()}", "30", check=False)
        assert waited.returncode == 0, docker("logs", self.name, check=False).stderr
        self.argv = docker("exec", self.name, "cat", "/tmp/standin/argv").stdout.splitlines()
        self.env = dict(line.split("=", 1) for line in
                        docker("exec", self.name, "cat", "/tmp/standin/env").stdout.splitlines() if "=" in line)
        logs = docker("logs", self.name)
        self.logs = logs.stdout + logs.stderr
        return self

    def port(self):
        env = json.loads(docker("inspect", self.name).stdout)[0]["Config"]["Env"]
        return dict(e.split("=", 1) for e in env).get("PORT", "8000")

    def __exit__(self, *exc):
        docker("rm", "-f", self.name, check=False)


def vllm_argv(model, name, extra=()):
    return ["vllm", "serve", model, "--served-model-name", name, "--host", "0.0.0.0", "--port", "8000",
            "--max-model-len", "65536", "--max-num-seqs", "16", "--max-num-batched-tokens", "32768",
            "--gpu-memory-utilization", "0.85", "--attention-backend", "flash_attn",
            "--load-format", "fastsafetensors", *extra]


def test_qwen36_defaults_serve_the_modelopt_checkpoint_with_dflash(recipes):
    with Served(recipes["qwen36-dflash"], {"MODEL_PATH": "/models/modelopt"}) as served:
        assert served.argv == vllm_argv("/models/modelopt", "modelopt", [
            "--quantization", "modelopt", "--speculative-config",
            '{"method":"dflash","model":"/models/drafter","num_speculative_tokens":15}'])
        assert "launch_server.sh: vllm serve /models/modelopt" in served.logs


def test_a_compressed_tensors_checkpoint_gets_no_quantization_flag(recipes):
    with Served(recipes["qwen35-dflash"], {"MODEL_PATH": "/models/compressed", "SERVED_MODEL_NAME": "qwen35"}) as s:
        assert s.argv == vllm_argv("/models/compressed", "qwen35", [
            "--speculative-config",
            '{"method":"dflash","model":"z-lab/Qwen3.5-27B-DFlash","num_speculative_tokens":15}'])


def test_dflash_off_and_runtime_overrides(recipes):
    env = {"MODEL_PATH": "/models/compressed", "DFLASH_DRAFTER": "", "MAX_NUM_SEQS": "4",
           "GPU_MEMORY_UTILIZATION": "0.7", "THINK_KWARGS": '{"enable_thinking": false}'}
    with Served(recipes["qwen3-coder-next-dflash"], env) as served:
        argv = served.argv
        assert "--speculative-config" not in argv
        assert argv[argv.index("--max-num-seqs") + 1] == "4"
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.7"
        assert argv[-2:] == ["--default-chat-template-kwargs", '{"enable_thinking": false}']


def test_extra_args_are_passed_verbatim_at_the_end(recipes):
    env = {"MODEL_PATH": "/models/modelopt", "EXTRA_ARGS": "--enable-prefix-caching --max-loras 2"}
    with Served(recipes["qwen36-dflash"], env) as served:
        assert served.argv[-3:] == ["--enable-prefix-caching", "--max-loras", "2"]


def test_turboquant_settings_reach_the_server_and_cuda_graphs_stay_on(recipes):
    with Served(recipes["qwen35-dflash-turboquant"], {"MODEL_PATH": "/models/compressed"}) as served:
        assert "--enforce-eager" not in served.argv
        assert {k: served.env[k] for k in ("ENABLE_TURBOQUANT", "TQ_MODE", "TQ_KEY_BITS", "TQ_VALUE_BITS",
                                           "TQ_RING_CAPACITY", "TQ_INITIAL_LAYERS")} == {
            "ENABLE_TURBOQUANT": "1", "TQ_MODE": "hybrid", "TQ_KEY_BITS": "4", "TQ_VALUE_BITS": "3",
            "TQ_RING_CAPACITY": "128", "TQ_INITIAL_LAYERS": "4"}
        assert "TurboQuant: mode=hybrid key_bits=4 value_bits=3" in served.logs


def test_the_prefill_baseline_runs_autoregressively_with_cutlass_gemms(recipes):
    env = {"MODEL_PATH": "/models/modelopt", "DFLASH_DRAFTER": "/models/drafter"}
    with Served(recipes["vllm-prefill"], env) as served:
        assert "--speculative-config" not in served.argv
        assert served.env["VLLM_NVFP4_GEMM_BACKEND"] == "cutlass"


def test_llamacpp_serves_the_first_gguf_shard_with_ngram_speculation(recipes):
    with Served(recipes["llamacpp-minimax-ngram"], {"MODEL_PATH": "/models/gguf"}) as served:
        assert served.argv == [
            "llama-server", "-m", "/models/gguf/minimax-m2-q4-00001-of-00002.gguf", "--alias", "minimax-m2-q4",
            "--host", "0.0.0.0", "--port", "8012", "-c", "65536", "-ngl", "999", "-np", "1",
            "--spec-type", "ngram-simple", "--draft-max", "64"]


def test_the_api_key_is_read_from_the_runtime_environment_only(recipes):
    with Served(recipes["qwen36-dflash"], {"MODEL_PATH": "/models/modelopt", "VLLM_API_KEY": SENTINEL}) as served:
        assert served.env["VLLM_API_KEY"] == SENTINEL  # vLLM reads it from its environment
        assert SENTINEL not in " ".join(served.argv)
        assert SENTINEL not in served.logs
        assert "API key: taken by vLLM from VLLM_API_KEY (not shown)" in served.logs


@pytest.mark.parametrize("env,message", [
    ({"MODEL_PATH": ""}, "MODEL_PATH is not set"),
    ({"MODEL_PATH": "/models/missing"}, "MODEL_PATH=/models/missing is not a directory"),
    ({"MODEL_PATH": "/models/empty"}, "MODEL_PATH=/models/empty has no config.json: not a model directory"),
    ({"MODEL_PATH": "/models/modelopt", "KV_CACHE_DTYPE": "fp8"}, "DFlash needs a BF16 KV cache"),
    ({"MODEL_PATH": "/models/modelopt", "MAX_NUM_SEQS": "lots"}, "MAX_NUM_SEQS must be a whole number"),
    ({"MODEL_PATH": "/models/modelopt", "DFLASH_DRAFTER": "x\"}"}, "DFLASH_DRAFTER may hold only"),
    ({"MODEL_PATH": "/models/modelopt", "NNODES": "2"}, "NNODES=2 needs MASTER_ADDR, the head's address"),
    ({"MODEL_PATH": "/models/modelopt", "NNODES": "2", "MASTER_ADDR": "h", "DISTRIBUTED_BACKEND": "mpi"},
     "DISTRIBUTED_BACKEND must be mp or ray"),
    ({"MODEL_PATH": "/models/modelopt", "TENSOR_PARALLEL_SIZE": "two"}, "TENSOR_PARALLEL_SIZE must be a whole number"),
])
def test_bad_runtime_settings_stop_the_launcher_with_a_clear_message(recipes, env, message):
    args = []
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    proc = docker("run", "--rm", *args, recipes["qwen36-dflash"], check=False)
    assert proc.returncode == 2
    assert message in proc.stderr


def dry_run(tag: str, env: dict) -> list[str]:
    """The launcher's command line, as LAUNCH_DRY_RUN=1 prints it (one `arg: ` line per argument)."""
    args = [a for key, value in {**env, "LAUNCH_DRY_RUN": "1"}.items() for a in ("-e", f"{key}={value}")]
    proc = docker("run", "--rm", *args, tag)
    return [line[5:] for line in proc.stdout.splitlines() if line.startswith("arg: ")]


def test_several_nodes_give_vllms_native_multi_node_flags_and_a_headless_worker(recipes):
    env = {"MODEL_PATH": "/models/modelopt", "NNODES": "2", "MASTER_ADDR": "192.168.100.10",
           "TENSOR_PARALLEL_SIZE": "2", "PIPELINE_PARALLEL_SIZE": "1", "EXTRA_ARGS": "--enable-prefix-caching"}
    head = dry_run(recipes["qwen36-dflash"], {**env, "NODE_RANK": "0"})
    worker = dry_run(recipes["qwen36-dflash"], {**env, "NODE_RANK": "1"})
    flags = ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "1", "--nnodes", "2", "--node-rank"]
    assert head[-11:] == [*flags, "0", "--master-addr", "192.168.100.10", "--master-port", "29500",
                          "--enable-prefix-caching"][-11:], head
    assert worker[-12:] == [*flags, "1", "--master-addr", "192.168.100.10", "--master-port", "29500", "--headless",
                            "--enable-prefix-caching"][-12:], worker
    assert head[:3] == ["vllm", "serve", "/models/modelopt"]
    ray = dry_run(recipes["qwen36-dflash"], {**env, "NODE_RANK": "0", "DISTRIBUTED_BACKEND": "ray"})
    assert "--distributed-executor-backend" in ray and "--nnodes" not in ray, ray


def test_llamacpp_offloads_to_the_rpc_servers_it_is_given(recipes):
    argv = dry_run(recipes["llamacpp-minimax-ngram"], {"MODEL_PATH": "/models/gguf",
                                                       "RPC_SERVERS": "192.168.100.11:50052,[fd00::3]:50052"})
    assert argv[-2:] == ["--rpc", "192.168.100.11:50052,[fd00::3]:50052"], argv
    proc = docker("run", "--rm", "-e", "MODEL_PATH=/models/gguf", "-e", "RPC_SERVERS=a:1;rm -rf /",
                  recipes["llamacpp-minimax-ngram"], check=False)
    assert proc.returncode == 2 and "RPC_SERVERS must be HOST:PORT" in proc.stderr


def test_llamacpp_without_a_model_stops_with_a_clear_message(recipes):
    proc = docker("run", "--rm", "-e", "MODEL_PATH=/models/empty", recipes["llamacpp-minimax-ngram"], check=False)
    assert proc.returncode == 2 and "MODEL_PATH=/models/empty holds no .gguf file" in proc.stderr


def test_the_autoregressive_launcher_drops_speculation(recipes):
    proc = docker("run", "--rm", "--entrypoint", "/opt/enginebuild/bin/launch_server_ar.sh", "-e",
                  "MODEL_PATH=/models/empty", recipes["qwen36-dflash"], check=False)
    assert proc.returncode == 2  # same contract, same checks
    name = f"eb-{uuid.uuid4().hex[:10]}"
    docker("run", "-d", "--name", name, "--entrypoint", "/opt/enginebuild/bin/launch_server_ar.sh",
           "-e", "MODEL_PATH=/models/modelopt", recipes["qwen36-dflash"])
    try:
        assert docker("exec", name, "/opt/enginebuild/bin/wait_for_server.sh", "http://127.0.0.1:8000", "30").returncode == 0
        argv = docker("exec", name, "cat", "/tmp/standin/argv").stdout.splitlines()
        assert "--speculative-config" not in argv and "--quantization" in argv
    finally:
        docker("rm", "-f", name, check=False)


def test_no_secret_reaches_image_config_or_history(recipes):
    for tag in recipes.values():
        inspect = docker("image", "inspect", tag).stdout
        history = docker("history", "--no-trunc", tag).stdout
        for text in (inspect, history):
            assert SENTINEL not in text
            assert "VLLM_API_KEY=" not in text and "HF_TOKEN=" not in text
