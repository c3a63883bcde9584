"""Start-up bootstrap for TurboQuant in vLLM, loaded by enginebuild-turboquant.pth.

TurboQuant is not a vLLM entry-point plugin: its hooks must be installed on each
worker's model runner. When ENABLE_TURBOQUANT=1, this module waits for vLLM's GPU
model runner to be imported and wraps its load_model so that, once the weights are
loaded, turboquant.vllm_attn_backend.install_turboquant_hooks runs with the TQ_*
settings. With ENABLE_TURBOQUANT unset it does nothing at all.
"""
import importlib.abc
import importlib.util
import inspect
import os
import sys

MODES = ("off", "capture_only", "hybrid", "full_tq")
RUNNER = "vllm.v1.worker.gpu_model_runner"


def settings():
    mode = os.environ.get("TQ_MODE", "hybrid")
    if mode not in MODES:
        raise ValueError(f"TQ_MODE must be one of {', '.join(MODES)}, got {mode!r}")
    out = {"mode": mode}
    for name, key, default in (("TQ_KEY_BITS", "key_bits", 4), ("TQ_VALUE_BITS", "value_bits", 3),
                               ("TQ_RING_CAPACITY", "ring_capacity", 128), ("TQ_INITIAL_LAYERS", "initial_layers", 4)):
        value = os.environ.get(name, str(default))
        if not value.isdigit():
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        out[key] = int(value)
    return out


def install(model_runner, config):
    from turboquant import vllm_attn_backend as backend

    mode = getattr(backend, "MODE_" + config["mode"].upper(), config["mode"])
    accepted = inspect.signature(backend.install_turboquant_hooks).parameters
    kwargs = {k: v for k, v in dict(config, mode=mode).items() if k in accepted}
    return backend.install_turboquant_hooks(model_runner, **kwargs)


def _wrap_runner(module, config):
    runner = getattr(module, "GPUModelRunner", None)
    if runner is None or getattr(runner.load_model, "_turboquant", False):
        return
    original = runner.load_model

    def load_model(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        install(self, config)
        print(f"turboquant: hooks installed ({config})", file=sys.stderr, flush=True)
        return result

    load_model._turboquant = True
    runner.load_model = load_model


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, config):
        self.config = config

    def find_spec(self, name, path, target=None):
        if name != RUNNER:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, config = spec.loader, self.config

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                _wrap_runner(module, config)

        spec.loader = Loader()
        return spec


def boot():
    if os.environ.get("ENABLE_TURBOQUANT") != "1":
        return
    config = settings()
    if config["mode"] == "off":
        return
    if RUNNER in sys.modules:
        _wrap_runner(sys.modules[RUNNER], config)
    else:
        sys.meta_path.insert(0, _Finder(config))


boot()
