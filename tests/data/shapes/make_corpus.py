"""Make the shapes corpus (tests/data/shapes) by running real renderers on the seed records' errors.

Dev-only: run it with a separate venv holding the renderers (never errkb's own dependencies):

    python3 -m venv /work/tmp/renderers-venv
    /work/tmp/renderers-venv/bin/pip install rich typer loguru structlog python-json-logger \
        sentry-sdk nbclient nbconvert nbformat ipykernel pytest
    /work/tmp/renderers-venv/bin/python tests/data/shapes/make_corpus.py

It writes stand-ins for the three sglang modules (and their callers) under ROOT, at the upstream
paths and with the raise on the upstream line, so every traceback is a real one from a real call
stack; then each shape function renders one case with a real tool (rich, typer, loguru, structlog,
python-json-logger, logging, nbclient/nbconvert, sentry-sdk, pytest, multiprocessing,
concurrent.futures, systemd-journald + journalctl when it can run) or, where no such tool can run
here, encodes the real traceback text exactly as that tool does (docker json-file, RFC 5424
syslog, email, HTML). ``expectations.json`` is written from the cases: the line of an occurrence
is the line where the record's message begins, found in the written file (whatever wrapping,
quoting or escaping the renderer applied).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import email.message
import email.policy
import html
import io
import json
import logging
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import traceback
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = Path("/tmp/errkb-shapes")
PYROOT = ROOT / "sgl-workspace" / "sglang" / "python"
PY = sys.executable

Q, C, M = "5c84e15f4be2c1a6", "b9825390f5c3ae68", "129d60f3f6e5f4e0"


def padded(src: str, target: int) -> str:
    """Put the line marked ``#@RAISE`` on line ``target`` (the upstream line), padding with comments."""
    lines = textwrap.dedent(src).lstrip("\n").splitlines()
    doc, body = lines[:1], lines[1:]
    at = next(i for i, line in enumerate(body) if "#@RAISE" in line)
    pad = target - 1 - len(doc) - at
    assert pad >= 0, (target, at)
    body[at] = body[at].replace("  #@RAISE", "")
    filler = ["# (upstream code elided in this stand-in)"] * pad
    return "\n".join(doc + filler + body) + "\n"


MODULES: dict[str, str] = {
    "sglang/__init__.py": '"""sglang (corpus stand-in)."""\n',
    "sglang/multimodal_gen/runtime/layers/quantization/configs/quanto_int8_config.py": padded(
        '''
        """Quanto INT8 checkpoint inspection (corpus stand-in; the checks and wording are upstream's)."""
        _FLOAT_DTYPES = {"BF16", "F16", "F32"}


        class _Slice:
            def __init__(self, dtype, shape):
                self._dtype, self._shape = dtype, list(shape)

            def get_dtype(self):
                return self._dtype

            def get_shape(self):
                return self._shape


        def inspect_quanto_int8_checkpoint(file_path, layers, param_name_mapper=None):
            for prefix, tensors in layers.items():
                names = {
                    "data": f"{prefix}.weight._data",
                    "scale": f"{prefix}.weight._scale",
                    "input": f"{prefix}.input_scale",
                    "output": f"{prefix}.output_scale",
                }
                missing = [n for n in names.values() if n[len(prefix) + 1 :] not in tensors]
                if missing:
                    raise ValueError(f"Quanto layer {prefix!r} is missing tensors: {sorted(missing)}")
                data_slice = _Slice(*tensors["weight._data"])
                scale_slice = _Slice(*tensors["weight._scale"])
                data_shape = tuple(data_slice.get_shape())
                scale_shape = tuple(scale_slice.get_shape())
                if data_slice.get_dtype() != "I8" or len(data_shape) != 2:
                    raise ValueError(
                        f"Quanto layer {prefix!r} needs a 2D I8 weight, got "
                        f"{data_slice.get_dtype()} {data_shape}"
                    )
                if scale_slice.get_dtype() not in _FLOAT_DTYPES or scale_shape != (
                    data_shape[0],
                    1,
                ):
                    raise ValueError(  #@RAISE
                        f"Quanto layer {prefix!r} has incompatible scale "
                        f"{scale_slice.get_dtype()} {scale_shape}"
                    )
                for scale_name in (names["input"], names["output"]):
                    scale = _Slice(*tensors[scale_name[len(prefix) + 1 :]])
                    if (
                        scale.get_dtype() not in _FLOAT_DTYPES
                        or tuple(scale.get_shape()) != ()
                    ):
                        raise ValueError(
                            f"Quanto auxiliary scale {scale_name!r} must be a float scalar"
                        )
            return {"file_path": file_path}
        ''',
        168,
    ),
    "sglang/multimodal_gen/runtime/loader/component_loader.py": '''"""Component loading (corpus stand-in)."""
from sglang.multimodal_gen.runtime.layers.quantization.configs.quanto_int8_config import (
    inspect_quanto_int8_checkpoint,
)


class ComponentCheckpointUnsupportedError(RuntimeError):
    """A component checkpoint this loader cannot configure."""


def _configure_checkpoint_quantization(component_name, checkpoint_path, layers):
    try:
        quant_config = inspect_quanto_int8_checkpoint(checkpoint_path, layers)
    except ValueError as error:
        raise ComponentCheckpointUnsupportedError(
            f"Cannot configure checkpoint quantization for {component_name!r}: {error}"
        ) from error
    return quant_config


def load_text_encoder(model_path, layers):
    checkpoint_path = f"{model_path}/text_encoder/model.safetensors"
    return _configure_checkpoint_quantization("text_encoder", checkpoint_path, layers)
''',
    "sglang/multimodal_gen/runtime/utils/quantization_utils.py": padded(
        '''
        """Comfy quantization markers (corpus stand-in; the checks and wording are upstream's)."""


        def inspect_comfy_quant_markers(safetensors_list, checkpoint_meta, raw_markers):
            for prefix, marker in raw_markers.items():
                marker_format = marker.get("format")
                if marker_format in ("w4a4", "nvfp4"):
                    label = "W4A4" if marker_format == "w4a4" else "NVFP4"
                    weight_shape = checkpoint_meta[f"{prefix}.weight"][1]
                    scale_shape = checkpoint_meta[f"{prefix}.weight_scale"][1]
                    raise ValueError(
                        f"Comfy {label} layer {prefix!r} has incompatible weight/scale "
                        f"shapes: {weight_shape} and {scale_shape}"
                    )
                if marker_format != "int8_tensorwise":
                    continue
                missing = [
                    name
                    for name in (f"{prefix}.weight", f"{prefix}.weight_scale")
                    if name not in checkpoint_meta
                ]
                if missing:
                    raise ValueError(
                        f"Comfy layer {prefix!r} is missing checkpoint tensors: {sorted(missing)}"
                    )
                weight_dtype, weight_shape = checkpoint_meta[f"{prefix}.weight"]
                scale_dtype, scale_shape = checkpoint_meta[f"{prefix}.weight_scale"]
                if weight_dtype == "I8" and scale_dtype == "F32" and scale_shape == ():
                    if len(weight_shape) != 2:
                        raise ValueError(
                            f"Comfy tensorwise INT8 layer {prefix!r} needs a 2D weight, "
                            f"got {weight_shape}"
                        )
                    marker["_is_tensorwise_scalar"] = True
                    continue
                if weight_dtype != "I8" or scale_dtype != "F32":
                    raise ValueError(
                        f"Comfy INT8 layer {prefix!r} needs I8 weights and F32 scales, "
                        f"got {weight_dtype} and {scale_dtype}"
                    )
                if len(weight_shape) != 2 or scale_shape != (weight_shape[0], 1):
                    raise ValueError(  #@RAISE
                        f"Comfy INT8 layer {prefix!r} has incompatible weight/scale "
                        f"shapes: {weight_shape} and {scale_shape}"
                    )
                marker["_is_rowwise"] = True
            return raw_markers
        ''',
        306,
    ),
    "sglang/multimodal_gen/runtime/loader/transformer_loader.py": '''"""Transformer loading (corpus stand-in)."""
from sglang.multimodal_gen.runtime.utils.quantization_utils import inspect_comfy_quant_markers


def load_transformer(model_path, checkpoint_meta, markers):
    safetensors_list = [f"{model_path}/transformer/diffusion_pytorch_model.safetensors"]
    markers = inspect_comfy_quant_markers(safetensors_list, checkpoint_meta, markers)
    return markers
''',
    "sglang/multimodal_gen/runtime/entrypoints/cli/generate.py": '''"""`sglang generate` (corpus stand-in)."""
from sglang.multimodal_gen.runtime.loader.transformer_loader import load_transformer


def main(model_path, checkpoint_meta, markers):
    generator = load_transformer(model_path, checkpoint_meta, markers)
    return generator
''',
    "sglang/srt/layers/parameter.py": '''"""Parameters (corpus stand-in)."""


class BasevLLMParameter:
    def __init__(self, data_shape):
        self.data_shape = data_shape


class PerTensorScaleParameter(BasevLLMParameter):
    """One scalar scale per logical shard."""
''',
    "sglang/srt/layers/linear.py": padded(
        '''
        """Linear layers (corpus stand-in; the check and wording are upstream's)."""
        from sglang.srt.layers.parameter import PerTensorScaleParameter


        class MergedColumnParallelLinear:
            def weight_loader_v2(self, param, loaded_weight, loaded_shard_id=None):
                if loaded_shard_id is None or isinstance(loaded_shard_id, tuple):
                    if isinstance(param, PerTensorScaleParameter):
                        if loaded_weight.numel() != 1:
                            raise ValueError(  #@RAISE
                                "Expected scalar scale for fused-in-checkpoint "
                                "merged-column checkpoint load, got shape "
                                f"{tuple(loaded_weight.shape)}"
                            )


        class QKVParallelLinear:
            def weight_loader_v2(self, param, loaded_weight, loaded_shard_id=None):
                if loaded_shard_id is None and isinstance(param, PerTensorScaleParameter):
                    if loaded_weight.numel() != 1:
                        raise ValueError(
                            "Expected scalar scale for fused-in-checkpoint QKV checkpoint "
                            "load when loaded_shard_id is None, got shape "
                            f"{tuple(loaded_weight.shape)}"
                        )
        ''',
        872,
    ),
    "sglang/srt/models/phi3.py": '''"""Phi-3 (corpus stand-in)."""
from sglang.srt.layers.linear import MergedColumnParallelLinear, QKVParallelLinear
from sglang.srt.layers.parameter import PerTensorScaleParameter


class LoadedWeight:
    def __init__(self, shape):
        self.shape = shape

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


class Phi3ForCausalLM:
    def __init__(self):
        self.layers = {
            "gate_up_proj": MergedColumnParallelLinear(),
            "qkv_proj": QKVParallelLinear(),
        }

    def load_weights(self, weights):
        for name, shape in weights:
            module = self.layers[name.split(".")[-2]]
            param = PerTensorScaleParameter(data_shape=(2,))
            loaded_weight = LoadedWeight(shape)
            weight_loader = module.weight_loader_v2
            weight_loader(param, loaded_weight)
''',
    "sglang/srt/model_loader/loader.py": '''"""Model loader (corpus stand-in)."""
from sglang.srt.models.phi3 import Phi3ForCausalLM


class DefaultModelLoader:
    def load_model(self, weights):
        model = Phi3ForCausalLM()
        self.load_weights_and_postprocess(model, weights)
        return model

    def load_weights_and_postprocess(self, model, weights):
        model.load_weights(weights)
''',
    "sglang/srt/model_executor/model_runner.py": '''"""Model runner (corpus stand-in)."""
from sglang.srt.model_loader.loader import DefaultModelLoader


class ModelRunner:
    def __init__(self, weights):
        self.weights = weights

    def load_model(self):
        self.model = DefaultModelLoader().load_model(self.weights)
''',
    "sglang/srt/managers/scheduler.py": '''"""Scheduler process (corpus stand-in)."""
from sglang.srt.model_executor.model_runner import ModelRunner


def run_scheduler_process(weights):
    runner = ModelRunner(weights)
    runner.load_model()
''',
}

# The cases: how to raise each message, and what errkb must report for it.
CASES_SRC = '''"""Corpus cases: each raises one real message through the stand-in sglang call stack."""
import sys

QUANTO_OK = {"weight._data": ("I8", (4096, 4096)), "weight._scale": ("F32", (4096, 1)),
             "input_scale": ("F32", ()), "output_scale": ("F32", ())}


def _quanto(prefix, **change):
    tensors = {**QUANTO_OK, **change}
    for key in [k for k, v in tensors.items() if v is None]:
        del tensors[key]
    from sglang.multimodal_gen.runtime.loader.component_loader import load_text_encoder
    load_text_encoder("/models/flux-qint8", {prefix: tensors})


def _comfy(prefix, fmt, weight, scale):
    meta = {}
    if weight is not None:
        meta[f"{prefix}.weight"] = weight
    if scale is not None:
        meta[f"{prefix}.weight_scale"] = scale
    from sglang.multimodal_gen.runtime.entrypoints.cli.generate import main
    main("/models/flux1-dev-comfy-int8", meta, {prefix: {"format": fmt}})


def _linear(name, shape):
    from sglang.srt.managers.scheduler import run_scheduler_process
    run_scheduler_process([(f"model.layers.3.mlp.{name}.weight_scale", shape)])


CASES = {
    "quanto_a": lambda: _quanto("encoder.block.3.layer.1.DenseReluDense.wi_0",
                                **{"weight._scale": ("F32", (4096,))}),
    "quanto_b": lambda: _quanto("encoder.block.0.layer.0.SelfAttention.q",
                                **{"weight._scale": ("BF16", (1, 4096))}),
    "quanto_c": lambda: _quanto("encoder.block.11.layer.0.SelfAttention.o",
                                **{"weight._scale": ("I32", (4096, 1))}),
    "quanto_d": lambda: _quanto("encoder.block.7.layer.1.DenseReluDense.wo",
                                **{"weight._scale": ("F32", ())}),
    "comfy_a": lambda: _comfy("double_blocks.7.img_attn.qkv", "int8_tensorwise",
                              ("I8", (9216, 3072)), ("F32", (1, 9216))),
    "comfy_b": lambda: _comfy("single_blocks.12.linear1", "int8_tensorwise",
                              ("I8", (21504, 3072)), ("F32", (21504,))),
    "comfy_c": lambda: _comfy("double_blocks.0.txt_mlp.0", "int8_tensorwise",
                              ("I8", (12288, 3072)), ("F32", (12288, 4))),
    "merged_a": lambda: _linear("gate_up_proj", (2,)),
    "merged_b": lambda: _linear("gate_up_proj", (35840, 1)),
    "merged_c": lambda: _linear("gate_up_proj", (1, 2)),
    "merged_d": lambda: _linear("gate_up_proj", (0,)),
    "neg_qkv": lambda: _linear("qkv_proj", (3,)),
    "neg_quanto_2d": lambda: _quanto("encoder.block.2.layer.0.SelfAttention.k",
                                     **{"weight._data": ("I8", (4096,))}),
    "neg_quanto_missing": lambda: _quanto("encoder.block.5.layer.0.SelfAttention.v",
                                          **{"weight._scale": None, "input_scale": None}),
    "neg_quanto_aux": lambda: _quanto("encoder.block.9.layer.1.DenseReluDense.wi_1",
                                      **{"input_scale": ("F32", (1,))}),
    "neg_comfy_missing": lambda: _comfy("double_blocks.3.img_mlp.2", "int8_tensorwise",
                                        ("I8", (3072, 12288)), None),
    "neg_comfy_w4a4": lambda: _comfy("double_blocks.7.img_attn.qkv", "w4a4",
                                     ("U8", (9216, 1536)), ("F8_E4M3", (1, 9216))),
    "neg_comfy_nvfp4": lambda: _comfy("single_blocks.4.linear2", "nvfp4",
                                      ("U8", (3072, 7680)), ("F8_E4M3", (3072,))),
    "neg_comfy_dtype": lambda: _comfy("double_blocks.1.txt_attn.proj", "int8_tensorwise",
                                      ("F8_E4M3", (3072, 3072)), ("F32", (3072, 1))),
    "neg_comfy_tensorwise": lambda: _comfy("final_layer.adaLN_modulation.1", "int8_tensorwise",
                                           ("I8", (6144, 3072, 1)), ("F32", ())),
}


def trigger(name):
    CASES[name]()


if __name__ == "__main__":
    trigger(sys.argv[1])
'''

QUANTO_MSG = "Quanto layer {!r} has incompatible scale {} {}"
COMFY_MSG = "Comfy INT8 layer {!r} has incompatible weight/scale shapes: {} and {}"
MERGED_MSG = (
    "Expected scalar scale for fused-in-checkpoint merged-column checkpoint load, got shape {}"
)


def _q(prefix: str, dtype: str, shape: str) -> dict[str, object]:
    return {
        "id": Q,
        "message": QUANTO_MSG.format(prefix, dtype, shape),
        "captures": {"prefix": prefix, "scale_slice.get_dtype()": dtype, "scale_shape": shape},
    }


def _c(prefix: str, weight: str, scale: str) -> dict[str, object]:
    return {
        "id": C,
        "message": COMFY_MSG.format(prefix, weight, scale),
        "captures": {"prefix": prefix, "weight_shape": weight, "scale_shape": scale},
    }


def _m(shape: str) -> dict[str, object]:
    return {
        "id": M,
        "message": MERGED_MSG.format(shape),
        "captures": {"tuple(loaded_weight.shape)": shape},
    }


EXPECT: dict[str, dict[str, object] | None] = {
    "quanto_a": _q("encoder.block.3.layer.1.DenseReluDense.wi_0", "F32", "(4096,)"),
    "quanto_b": _q("encoder.block.0.layer.0.SelfAttention.q", "BF16", "(1, 4096)"),
    "quanto_c": _q("encoder.block.11.layer.0.SelfAttention.o", "I32", "(4096, 1)"),
    "quanto_d": _q("encoder.block.7.layer.1.DenseReluDense.wo", "F32", "()"),
    "comfy_a": _c("double_blocks.7.img_attn.qkv", "(9216, 3072)", "(1, 9216)"),
    "comfy_b": _c("single_blocks.12.linear1", "(21504, 3072)", "(21504,)"),
    "comfy_c": _c("double_blocks.0.txt_mlp.0", "(12288, 3072)", "(12288, 4)"),
    "merged_a": _m("(2,)"),
    "merged_b": _m("(35840, 1)"),
    "merged_c": _m("(1, 2)"),
    "merged_d": _m("(0,)"),
}


def exc_of(case: str) -> BaseException:
    import corpus_cases  # written under ROOT at setup

    try:
        corpus_cases.trigger(case)
    except BaseException as exc:
        return exc
    raise AssertionError(f"case {case} raised nothing")


def plain_tb(case: str) -> str:
    return "".join(traceback.format_exception(exc_of(case)))


def caught(case: str, handler: Callable[[], object]) -> None:
    """Raise ``case`` and let ``handler`` render it from inside ``except`` (sys.exc_info() is set).

    A frame of its own, so renderers that print locals (rich, loguru, Sentry) see only
    ``case`` and ``handler`` here, never a leftover exception object of another case.
    """
    import corpus_cases

    try:
        corpus_cases.trigger(case)
    except Exception:
        handler()


# ---------------------------------------------------------------- shapes

OUT: dict[str, tuple[bytes, str, str]] = {}  # file -> (content, case, shape note)


def emit(name: str, content: str | bytes, case: str, note: str) -> None:
    data = content.encode() if isinstance(content, str) else content
    OUT[name] = (data, case, note)


def run(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": f"{PYROOT}:{ROOT}", **(env or {})}
    return subprocess.run(
        args, capture_output=True, text=True, env=full_env, cwd=cwd or ROOT, timeout=300
    )


def shape_rich() -> None:
    from rich.console import Console
    from rich.logging import RichHandler
    from rich.traceback import install

    def console(width: int, color: bool = False) -> tuple[Console, io.StringIO]:
        buf = io.StringIO()
        con = Console(
            file=buf, width=width, force_terminal=color, color_system="standard" if color else None
        )
        return con, buf

    old = sys.excepthook
    for width, case, file in [
        (60, "quanto_a", "rich_install_w60_quanto.log"),
        (80, "comfy_a", "rich_install_w80_comfy.log"),
        (120, "merged_a", "rich_install_w120_merged.log"),
        (80, "quanto_b", "rich_install_w80_quanto.log"),
        (80, "neg_qkv", "rich_install_w80_neg_qkv.log"),
        (60, "neg_quanto_2d", "rich_install_w60_neg_quanto_2d.log"),
    ]:
        con, buf = console(width)
        install(console=con)
        exc = exc_of(case)
        sys.excepthook(type(exc), exc, exc.__traceback__)
        sys.excepthook = old
        emit(
            file,
            buf.getvalue(),
            case,
            f"rich.traceback.install(console=Console(width={width})), uncaught exception",
        )
    for width, case, file, color in [
        (80, "comfy_b", "rich_print_exception_locals_w80_comfy.log", False),
        (120, "merged_b", "rich_print_exception_locals_w120_merged.log", False),
        (60, "comfy_c", "rich_print_exception_locals_w60_comfy.log", False),
        (100, "merged_c", "rich_print_exception_locals_ansi_w100_merged.log", True),
        (80, "neg_comfy_w4a4", "rich_print_exception_locals_w80_neg_w4a4.log", False),
    ]:
        con, buf = console(width, color)
        caught(case, lambda: con.print_exception(show_locals=True))
        emit(
            file, buf.getvalue(), case, f"Console(width={width}).print_exception(show_locals=True)"
        )
    for width, case, file, rich_tb in [
        (80, "comfy_a", "rich_handler_w80_comfy.log", False),
        (120, "merged_d", "rich_handler_rich_tracebacks_w120_merged.log", True),
        (100, "quanto_c", "rich_handler_w100_quanto.log", False),
        (120, "neg_comfy_missing", "rich_handler_w120_neg_comfy_missing.log", False),
    ]:
        con, buf = console(width)
        log = logging.getLogger(f"sglang.rich.{file}")
        log.propagate = False
        log.handlers = [RichHandler(console=con, rich_tracebacks=rich_tb, log_time_format="[%X]")]
        caught(case, lambda: log.exception("Failed to load the model"))
        emit(
            file,
            buf.getvalue(),
            case,
            f"logging RichHandler(rich_tracebacks={rich_tb}), width {width}",
        )


TYPER_APP = '''
import typer
import corpus_cases

app = typer.Typer(pretty_exceptions_show_locals={locals})


@app.command()
def generate(model_path: str, case: str = "comfy_a") -> None:
    """Load a checkpoint."""
    corpus_cases.trigger(case)


if __name__ == "__main__":
    app()
'''


def shape_typer() -> None:
    for width, case, file, show_locals in [
        (80, "comfy_a", "typer_cli_w80_comfy.log", True),
        (120, "merged_b", "typer_cli_w120_merged.log", True),
        (80, "quanto_d", "typer_cli_w80_nolocals_quanto.log", False),
        (100, "neg_comfy_nvfp4", "typer_cli_w100_neg_nvfp4.log", True),
    ]:
        script = ROOT / f"typer_{case}.py"
        script.write_text(TYPER_APP.format(locals=show_locals))
        proc = run(
            [PY, str(script), "/models/flux1-dev-comfy-int8", "--case", case],
            env={"COLUMNS": str(width), "TERM": "dumb", "NO_COLOR": "1"},
        )
        emit(
            file,
            proc.stderr,
            case,
            f"typer app raising, COLUMNS={width}, pretty_exceptions_show_locals={show_locals}",
        )


def shape_loguru() -> None:
    from loguru import logger

    for case, file, kwargs in [
        ("comfy_b", "loguru_diagnose_comfy.log", {"diagnose": True, "backtrace": True}),
        ("quanto_a", "loguru_serialize_quanto.log", {"serialize": True, "diagnose": False}),
        ("merged_a", "loguru_colorize_merged.log", {"colorize": True, "diagnose": False}),
        ("merged_c", "loguru_diagnose_colorize_merged.log", {"colorize": True, "diagnose": True}),
        ("neg_comfy_w4a4", "loguru_serialize_neg_w4a4.log", {"serialize": True}),
    ]:
        buf = io.StringIO()
        logger.remove()
        sink = logger.add(buf, **{"colorize": False, **kwargs})
        caught(case, lambda: logger.exception("Worker failed while loading {}", "the checkpoint"))
        logger.remove(sink)
        emit(file, buf.getvalue(), case, f"loguru logger.exception with {kwargs}")


def shape_structlog() -> None:
    import structlog

    for case, file, processor in [
        (
            "merged_b",
            "structlog_json_format_exc_info_merged.log",
            structlog.processors.format_exc_info,
        ),
        (
            "quanto_b",
            "structlog_json_format_exc_info_quanto.log",
            structlog.processors.format_exc_info,
        ),
        ("comfy_c", "structlog_dict_tracebacks_comfy.log", structlog.processors.dict_tracebacks),
        ("merged_d", "structlog_dict_tracebacks_merged.log", structlog.processors.dict_tracebacks),
        ("neg_qkv", "structlog_json_neg_qkv.log", structlog.processors.format_exc_info),
        (
            "neg_quanto_aux",
            "structlog_dict_tracebacks_neg_quanto_aux.log",
            structlog.processors.dict_tracebacks,
        ),
    ]:
        buf = io.StringIO()
        structlog.configure(
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso"),
                processor,
                structlog.processors.JSONRenderer(),
            ],
            logger_factory=structlog.PrintLoggerFactory(file=buf),
            cache_logger_on_first_use=False,
        )
        log = structlog.get_logger()
        log.info("loading checkpoint", case=case)
        caught(case, lambda: log.exception("checkpoint load failed"))
        emit(
            file,
            buf.getvalue(),
            case,
            f"structlog JSONRenderer with {processor.__class__.__name__ if not callable(processor) else getattr(processor, '__name__', type(processor).__name__)}",
        )


def shape_jsonlogger_and_stdlib() -> None:
    from pythonjsonlogger.json import JsonFormatter

    for case, file, fmt in [
        ("quanto_c", "jsonlogger_quanto.log", "json"),
        ("comfy_a", "jsonlogger_comfy.log", "json"),
        ("neg_comfy_nvfp4", "jsonlogger_neg_nvfp4.log", "json"),
        ("merged_a", "stdlib_logger_exception_merged.log", "plain"),
        ("quanto_d", "stdlib_logger_exception_quanto.log", "plain"),
        ("neg_quanto_aux", "stdlib_logger_exception_neg_quanto_aux.log", "plain"),
    ]:
        buf = io.StringIO()
        handler = logging.StreamHandler(buf)
        if fmt == "json":
            handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        else:
            handler.setFormatter(
                logging.Formatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s")
            )
        log = logging.getLogger(f"sglang.{file}")
        log.propagate = False
        log.handlers = [handler]
        log.setLevel(logging.INFO)
        log.info("Loading weights")
        caught(case, lambda: log.exception("Scheduler hit an exception"))
        emit(
            file,
            buf.getvalue(),
            case,
            "python-json-logger JsonFormatter"
            if fmt == "json"
            else "stdlib logging logger.exception",
        )


def _stamp(i: int) -> datetime.datetime:
    return datetime.datetime(
        2026, 12, 1, 6, 2, 8, 123456, tzinfo=datetime.UTC
    ) + datetime.timedelta(microseconds=1717 * i)


def shape_docker() -> None:
    for case, file, interleave in [
        ("quanto_a", "docker_jsonfile_quanto.log", False),
        ("merged_b", "docker_jsonfile_merged.log", False),
        ("comfy_b", "docker_jsonfile_interleaved_comfy.log", True),
        ("neg_qkv", "docker_jsonfile_neg_qkv.log", False),
    ]:
        proc = run([PY, "corpus_cases.py", case])
        lines: list[tuple[str, str]] = [
            ("stdout", "Loading safetensors checkpoint shards: 100% Completed | 2/2\n")
        ]
        err = proc.stderr.splitlines(keepends=True)
        for i, line in enumerate(err):
            lines.append(("stderr", line))
            if interleave and i % 4 == 3:
                lines.append(("stdout", f"[2026-12-01 06:02:0{i % 10}] heartbeat ok\n"))
        out = []
        for i, (stream, text) in enumerate(lines):
            t = _stamp(i).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
            out.append(
                json.dumps({"log": text, "stream": stream, "time": t}, separators=(",", ":")) + "\n"
            )
        emit(
            file,
            "".join(out),
            case,
            "docker json-file driver encoding (one object per output line), encoded faithfully",
        )


def _journald_running() -> bool:
    # The socket file outlives a stopped journald: try a real stream connection.
    return subprocess.run(["systemd-cat", "true"], capture_output=True).returncode == 0


JOURNAL_MODES = [
    "short",
    "short-iso",
    "short-iso-precise",
    "short-precise",
    "short-full",
    "short-monotonic",
    "short-unix",
    "with-unit",
    "cat",
    "json",
    "json-pretty",
    "verbose",
    "export",
]


# Keeps the structured modes (json, verbose, export) a few KB; journalctl still adds its own
# fields (__CURSOR, timestamps) as it does for any --output-fields.
JOURNAL_FIELDS = "MESSAGE,PRIORITY,SYSLOG_IDENTIFIER,_PID,_COMM,_HOSTNAME,_TRANSPORT,_SYSTEMD_UNIT"


def shape_journald() -> None:
    started = None
    if not _journald_running() and Path("/usr/lib/systemd/systemd-journald").exists():
        Path("/run/systemd/journal").mkdir(parents=True, exist_ok=True)
        started = subprocess.Popen(["/usr/lib/systemd/systemd-journald"])
        for _ in range(50):
            if _journald_running():
                break
            time.sleep(0.1)
    if not _journald_running():
        raise SystemExit("journald cannot run here: encode the -o modes instead")
    cases = [
        "quanto_b",
        "comfy_a",
        "merged_a",
        "comfy_c",
        "merged_c",
        "quanto_a",
        "comfy_b",
        "merged_b",
        "neg_qkv",
        "neg_comfy_dtype",
        "merged_d",
        "quanto_c",
        "neg_quanto_missing",
    ]
    try:
        for mode, case in zip(JOURNAL_MODES, cases, strict=True):
            ident = f"sglang-{case.replace('_', '-')}"
            env = {**os.environ, "PYTHONPATH": f"{PYROOT}:{ROOT}"}
            # systemd-cat execs the command: the child's pid is the entries' _PID.
            proc = subprocess.Popen(
                ["systemd-cat", "-t", ident, PY, "corpus_cases.py", case], cwd=ROOT, env=env
            )
            assert proc.wait(60) != 0
            time.sleep(0.5)
            out = subprocess.run(
                [
                    "journalctl",
                    "--no-pager",
                    "-o",
                    mode,
                    f"--output-fields={JOURNAL_FIELDS}",
                    f"SYSLOG_IDENTIFIER={ident}",
                    f"_PID={proc.pid}",
                ],
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
            assert "Traceback" in out, (mode, out[:200])
            emit(
                f"journald_{mode.replace('-', '_')}_{case}.log",
                out,
                case,
                f"systemd-cat + journalctl -o {mode} (real systemd-journald)",
            )
    finally:
        if started is not None:
            started.terminate()
            started.wait(10)


def shape_syslog() -> None:
    for case, file in [
        ("merged_a", "syslog_rfc5424_merged.log"),
        ("comfy_c", "syslog_rfc5424_comfy.log"),
        ("neg_comfy_tensorwise", "syslog_rfc5424_neg_comfy_tensorwise.log"),
    ]:
        out = []
        for i, line in enumerate(plain_tb(case).splitlines()):
            ts = _stamp(i).isoformat(timespec="microseconds").replace("+00:00", "Z")
            out.append(f"<11>1 {ts} worker-1.example.com sglang 14047 - - {line}\n")
        emit(
            file,
            "".join(out),
            case,
            "RFC 5424 syslog lines, one per traceback line (encoded faithfully)",
        )


NOTEBOOK_CELLS = [
    "import sys\nsys.path[:0] = [{pyroot!r}, {root!r}]\nimport corpus_cases",
    "# Load the checkpoint\ncorpus_cases.trigger({case!r})",
]


def shape_jupyter() -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter, MarkdownExporter, RSTExporter, ScriptExporter

    for case, base, conversions in [
        ("quanto_a", "jupyter_nbclient_quanto", ["ipynb", "html"]),
        ("comfy_a", "jupyter_nbclient_comfy", ["ipynb", "md"]),
        ("merged_b", "jupyter_nbclient_merged", ["md", "py"]),
        ("comfy_b", "jupyter_nbclient_comfy_b", ["html"]),
        ("neg_qkv", "jupyter_nbclient_neg_qkv", ["ipynb", "md"]),
        ("neg_quanto_2d", "jupyter_nbclient_neg_quanto_2d", ["html", "py"]),
    ]:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_markdown_cell("Reproduce the checkpoint load failure.")]
        nb.cells += [
            nbformat.v4.new_code_cell(c.format(pyroot=str(PYROOT), root=str(ROOT), case=case))
            for c in NOTEBOOK_CELLS
        ]
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        NotebookClient(
            nb,
            timeout=120,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(ROOT)}},
        ).execute()
        for conv in conversions:
            if conv == "ipynb":
                emit(
                    f"{base}.ipynb",
                    nbformat.writes(nb) + "\n",
                    case,
                    "nbclient-executed notebook (.ipynb JSON)",
                )
            elif conv == "md":
                emit(
                    f"{base}_nbconvert.md",
                    MarkdownExporter().from_notebook_node(nb)[0],
                    case,
                    "nbconvert --to markdown",
                )
            elif conv == "rst":
                emit(
                    f"{base}_nbconvert.rst",
                    RSTExporter().from_notebook_node(nb)[0],
                    case,
                    "nbconvert --to rst (text)",
                )
            elif conv == "html":
                emit(
                    f"{base}_nbconvert.html",
                    _trim_html(HTMLExporter(template_name="basic").from_notebook_node(nb)[0]),
                    case,
                    "nbconvert --to html --template basic",
                )
            elif conv == "py":
                emit(
                    f"{base}_nbconvert_script.py",
                    ScriptExporter().from_notebook_node(nb)[0],
                    case,
                    "nbconvert --to script (code only: no output, no occurrence)",
                )


def _trim_html(text: str) -> str:
    return text


def shape_sentry() -> None:
    import sentry_sdk
    from sentry_sdk.transport import Transport

    events: list[dict[str, object]] = []

    class FileTransport(Transport):
        def capture_envelope(self, envelope):  # type: ignore[no-untyped-def]
            event = envelope.get_event()
            if event is not None:
                events.append(event)

    sentry_sdk.init(
        dsn="https://public@o0.ingest.example.com/1",
        transport=FileTransport,
        server_name="worker-1.example.com",
        release="sglang@0.5.0",
        environment="corpus",
        default_integrations=False,
        include_local_variables=True,
    )
    for case, file in [
        ("comfy_b", "sentry_event_comfy.json"),
        ("merged_c", "sentry_event_merged.json"),
        ("quanto_b", "sentry_event_nolocals_quanto.json"),
        ("neg_comfy_w4a4", "sentry_event_neg_w4a4.json"),
    ]:
        events.clear()
        sentry_sdk.get_client().options["include_local_variables"] = not case.startswith("quanto")
        caught(case, sentry_sdk.capture_exception)
        sentry_sdk.flush()
        assert events, case
        event = events[0]
        event.pop("modules", None)  # the renderer venv's package list: noise, not shape
        emit(
            file,
            json.dumps(event, indent=2, sort_keys=True) + "\n",
            case,
            "sentry-sdk event via a custom Transport (capture_exception), JSON",
        )


PYTEST_FILE = """
import corpus_cases


def test_load_checkpoint():
    corpus_cases.trigger({case!r})
"""


def shape_pytest() -> None:
    for mode, case, extra in [
        ("auto", "quanto_a", []),
        ("long", "comfy_a", []),
        ("short", "merged_a", []),
        ("line", "quanto_b", []),
        ("native", "comfy_c", []),
        ("no", "merged_b", ["-vv"]),
        ("no", "comfy_b", []),
        ("short", "neg_qkv", []),
        ("line", "neg_comfy_missing", []),
        ("long", "neg_quanto_2d", ["-vv"]),
    ]:
        d = ROOT / f"pytest_{mode}_{case}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        (d / "test_checkpoint.py").write_text(PYTEST_FILE.format(case=case))
        proc = run(
            [
                PY,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                f"--tb={mode}",
                "-rA",
                *extra,
                "test_checkpoint.py",
            ],
            env={"COLUMNS": "120"},
            cwd=d,
        )
        vv = "_vv" if extra else ""
        emit(
            f"pytest_tb_{mode}{vv}_{case}.log",
            _scrub_pytest(proc.stdout),
            case,
            f"pytest --tb={mode} -rA {' '.join(extra)}".strip(),
        )
    for case in ["comfy_b", "quanto_c", "neg_comfy_dtype"]:
        d = ROOT / f"pytest_junit_{case}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        (d / "test_checkpoint.py").write_text(PYTEST_FILE.format(case=case))
        run(
            [
                PY,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "--junitxml=report.xml",
                "test_checkpoint.py",
            ],
            cwd=d,
        )
        xml = re.sub(
            r'timestamp="[^"]*"',
            'timestamp="2026-12-01T06:02:08.123456+00:00"',
            (d / "report.xml").read_text(),
        )
        xml = re.sub(r'hostname="[^"]*"', 'hostname="worker-1.example.com"', xml)
        xml = re.sub(r'time="[^"]*"', 'time="0.042"', xml)
        emit(f"pytest_junitxml_{case}.xml", xml + "\n", case, "pytest --junitxml (XML entities)")


def _scrub_pytest(text: str) -> str:
    return re.sub(r" in \d+\.\d+s", " in 0.04s", text)


def shape_remote() -> None:
    import corpus_cases

    ctx = multiprocessing.get_context("spawn")
    for case, file in [
        ("quanto_c", "multiprocessing_pool_remote_quanto.log"),
        ("merged_d", "multiprocessing_pool_remote_merged.log"),
        ("neg_comfy_nvfp4", "multiprocessing_pool_remote_neg_nvfp4.log"),
    ]:
        with ctx.Pool(1) as pool:
            try:
                pool.apply(corpus_cases.trigger, (case,))
            except Exception as exc:
                emit(
                    file,
                    "".join(traceback.format_exception(exc)),
                    case,
                    "multiprocessing.Pool.apply: RemoteTraceback chained to the re-raised error",
                )
    for case, file in [
        ("comfy_a", "concurrent_futures_process_comfy.log"),
        ("neg_qkv", "concurrent_futures_process_neg_qkv.log"),
    ]:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
            try:
                pool.submit(corpus_cases.trigger, case).result()
            except Exception as exc:
                emit(
                    file,
                    "".join(traceback.format_exception(exc)),
                    case,
                    "concurrent.futures.ProcessPoolExecutor: _RemoteTraceback",
                )


def _email(subject: str, body: str) -> str:
    msg = email.message.EmailMessage(policy=email.policy.SMTP)
    msg["From"] = "Dev One <dev1@example.com>"
    msg["To"] = "sglang-users@example.org"
    msg["Subject"] = subject
    msg["Date"] = "Tue, 01 Dec 2026 06:02:08 +0000"
    msg["Message-ID"] = "<corpus-1@example.com>"
    msg.set_content(body, cte="8bit")
    return msg.as_string()


def _wrap72(text: str, quote: str = "") -> str:
    out = []
    for line in text.splitlines():
        width = 72 - len(quote)
        pieces = textwrap.wrap(
            line,
            width,
            break_long_words=False,
            break_on_hyphens=False,
            drop_whitespace=True,
            replace_whitespace=False,
        ) or [""]
        # keep the original indentation of the first piece (textwrap keeps leading spaces)
        out.extend((quote + p).rstrip() if quote else p for p in pieces)
    return "\n".join(out) + "\n"


def shape_email() -> None:
    for case, file, style in [
        ("merged_b", "email_wrap72_merged.eml", "wrap"),
        ("comfy_a", "email_quoted_reply_comfy.eml", "quote"),
        ("quanto_d", "email_double_quoted_quanto.eml", "quote2"),
        ("neg_qkv", "email_quoted_reply_neg_qkv.eml", "quote"),
    ]:
        tb = plain_tb(case)
        if style == "wrap":
            body = "Hi all,\n\nloading the checkpoint fails with:\n\n" + tb + "\nAny idea?\n"
            body = _wrap72(body)
        elif style == "quote":
            body = (
                "Did you set the quantization config?\n\nOn Mon, 30 Nov 2026 at 18:40, Dev Two "
                "<dev2@example.com> wrote:\n" + _wrap72("Loading fails:\n\n" + tb, "> ")
            )
        else:
            inner = _wrap72("It fails here:\n\n" + tb, "> ")
            body = (
                "Same here.\n\nOn Tue, 1 Dec 2026 at 07:00, Dev Two <dev2@example.com> wrote:\n"
                "> Can you paste the log?\n>\n> On Mon, 30 Nov 2026, Dev Three <dev3@example.com> wrote:\n"
                + "".join(
                    ">" + line + "\n" if line.startswith(">") else "> " + line + "\n"
                    for line in inner.splitlines()
                )
            )
        emit(
            file,
            _email("Re: checkpoint fails to load", body),
            case,
            f"email body wrapped at 72 columns ({style}) via email.message (encoded faithfully)",
        )


def shape_html() -> None:
    for case, file in [
        ("quanto_b", "html_issue_page_quanto.html"),
        ("comfy_c", "html_issue_page_comfy.html"),
        ("neg_comfy_w4a4", "html_issue_page_neg_w4a4.html"),
    ]:
        tb = plain_tb(case)
        page = (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            "<title>Checkpoint load fails &middot; Issue #1234 &middot; example/sglang</title></head>\n"
            '<body>\n<div class="comment-body markdown-body">\n'
            "<p>Loading with <code>--quantization fp8 &amp;&amp; --tp 1</code> fails:</p>\n"
            f'<div class="highlight"><pre class="notranslate"><code>{html.escape(tb, quote=True)}</code></pre></div>\n'
            "<p>Any &quot;quick&quot; workaround?</p>\n</div>\n</body></html>\n"
        )
        emit(
            file,
            page,
            case,
            "saved HTML issue page: html.escape(quote=True) inside <pre><code> (&#x27; &quot; &amp;)",
        )


WINDOWS_BASE = "C:\\Users\\dev\\AppData\\Local\\Programs\\Python\\Python312\\Lib\\site-packages\\"


def shape_windows() -> None:
    # The interpreter's own traceback, its frame paths rewritten to a Windows install's.
    for case, file in [
        ("comfy_b", "windows_crlf_comfy.log"),
        ("merged_c", "windows_crlf_merged.log"),
        ("neg_quanto_missing", "windows_crlf_neg_quanto_missing.log"),
    ]:
        text = plain_tb(case)
        for rel in MODULES:
            posix = str(PYROOT / rel)
            win = WINDOWS_BASE + rel.replace("/", "\\")
            text = text.replace(f'File "{posix}"', f'File "{win}"')
        text = text.replace(
            f'File "{ROOT}/corpus_cases.py"', 'File "C:\\Users\\dev\\repro\\corpus_cases.py"'
        )
        text = "PS C:\\Users\\dev\\repro> python repro.py\n" + text
        emit(
            file,
            text.replace("\n", "\r\n"),
            case,
            "traceback with Windows paths, CRLF line endings",
        )


def shape_markdown() -> None:
    for case, file in [
        ("merged_c", "markdown_indented_merged.md"),
        ("quanto_c", "markdown_indented_quanto.md"),
        ("neg_qkv", "markdown_indented_neg_qkv.md"),
    ]:
        tb = textwrap.indent(plain_tb(case), "    ")
        emit(
            file,
            "## Bug report\n\nThe server dies while loading weights:\n\n"
            + tb
            + "\nVersion: 0.5.0\n",
            case,
            "Markdown issue body with a 4-space indented code block",
        )


def shape_pyyaml() -> None:
    import yaml

    for case, file, width in [
        ("quanto_a", "pyyaml_double_quoted_quanto.yaml", 80),
        ("comfy_b", "pyyaml_double_quoted_w60_comfy.yaml", 60),
        ("neg_quanto_2d", "pyyaml_double_quoted_neg_quanto_2d.yaml", 80),
    ]:
        # A job runner's status file: the traceback as one string, which PyYAML writes as a
        # double-quoted scalar (it holds newlines) folded at ``width`` with backslashes.
        status = {"job": "load-text-encoder", "status": "failed", "error": plain_tb(case)}
        emit(
            file,
            yaml.safe_dump(status, width=width, sort_keys=False),
            case,
            f"PyYAML {yaml.__version__} safe_dump, double-quoted scalar folded at width {width}",
        )


# ------------------------------------------------------- issue 49: strace, zstd, MIME mail
#: Files whose expected lines are found by their own reader, not in the written bytes as they are.
LINES_OF: dict[str, Callable[[bytes, str], list[int]]] = {}


def _strace_lines(data: bytes, message: str) -> list[int]:
    """Where each line holding ``message`` begins in strace output, decoded here on its own.

    strace prints a write's data as a C string; a stream's line begins at the first write after
    its previous line break (Python writes a traceback's last line in four writes).
    """
    import codecs

    regex = message_regex(message)
    streams: dict[tuple[str, str], tuple[int, str]] = {}
    found: list[int] = []
    for number, line in enumerate(data.decode().split("\n"), 1):
        m = re.match(r'(\d+) [\d:.]+ write\((\d+), "((?:[^"\\]|\\.)*)"', line)
        if m is None:
            continue
        text = codecs.escape_decode(m[3].encode())[0].decode("utf-8", "replace")
        first, pending = streams.get((m[1], m[2]), (number, ""))
        if not pending:
            first = number
        pending += text
        while "\n" in pending:
            done, pending = pending.split("\n", 1)
            if regex.search(done):
                found.append(first)
            first = number
        streams[m[1], m[2]] = (first, pending)
    return found


def shape_strace() -> None:
    """Real strace -f -s 1024 -tt of the interpreter raising the case (its stderr writes)."""
    for case, file in [
        ("quanto_c", "strace_write_quanto.log"),
        ("neg_qkv", "strace_write_neg_qkv.log"),
    ]:
        out = ROOT / f"{case}.strace"
        run(
            [
                "strace",
                "-f",
                "-s",
                "1024",
                "-tt",
                "-e",
                "trace=write",
                "-o",
                str(out),
                PY,
                "corpus_cases.py",
                case,
            ]
        )
        data = out.read_bytes()
        # A plain "write(" line per write of the program; the interpreter's own start is quiet.
        emit(
            file,
            data,
            case,
            "strace -f -s 1024 -tt -e trace=write python corpus_cases.py (real strace)",
        )
        LINES_OF[file] = _strace_lines


def _unzstd_lines(data: bytes, message: str) -> list[int]:
    plain = subprocess.run(["zstd", "-q", "-d", "-c"], input=data, capture_output=True, check=True)
    return expected_lines(plain.stdout, message)


def shape_zstd() -> None:
    """A plain traceback log compressed by the real zstd command line tool."""
    for case, file in [
        ("comfy_b", "zstd_cli_comfy.log.zst"),
        ("neg_qkv", "zstd_cli_neg_qkv.log.zst"),
    ]:
        log = ("2026-12-01 06:02:08 INFO loading checkpoint\n" + plain_tb(case)).encode()
        packed = subprocess.run(
            ["zstd", "-q", "-19", "-c"], input=log, capture_output=True, check=True
        )
        emit(file, packed.stdout, case, "zstd -19 of a plain traceback log (real zstd CLI)")
        LINES_OF[file] = _unzstd_lines


def _qp_lines(data: bytes, message: str) -> list[int]:
    """Where each line holding ``message`` begins in a quoted-printable mail, counted by hand.

    The body follows the first blank line; a line ending in ``=`` continues on the next one.
    """
    import quopri

    regex = message_regex(message)
    lines = [line.rstrip("\r") for line in data.decode().split("\n")]
    found: list[int] = []
    first, pending = 0, ""
    for number in range(lines.index("") + 2, len(lines) + 1):
        raw = lines[number - 1]
        if not pending:
            first = number
        if raw.endswith("="):
            pending += raw[:-1] or "\0"  # a soft break alone on its line still continues
            continue
        text = quopri.decodestring((pending.replace("\0", "") + raw).encode()).decode()
        pending = ""
        if raw.startswith("<") or "<pre>" in text:
            break  # the HTML alternative: read once, as plain text
        if regex.search(text):
            found.append(first)
    return found


def shape_mime() -> None:
    """A cron-style mail by the email package: quoted-printable text with an HTML alternative."""
    case, file = "quanto_a", "email_qp_alternative_quanto.eml"
    tb = plain_tb(case)
    msg = email.message.EmailMessage(policy=email.policy.SMTP)
    msg["From"] = "Cron Daemon <root@gpu7.example.com>"
    msg["To"] = "ml-team@example.com"
    msg["Subject"] = "Cron <root@gpu7> python convert_checkpoint.py"
    msg["Date"] = "Tue, 01 Dec 2026 06:02:08 +0000"
    msg.set_content("The nightly conversion failed (a=3):\n\n" + tb, cte="quoted-printable")
    msg.add_alternative(f"<html><body><pre>{html.escape(tb)}</pre></body></html>", subtype="html")
    emit(
        file,
        msg.as_bytes(),
        case,
        "email.message quoted-printable text/plain + text/html alternative",
    )
    LINES_OF[file] = _qp_lines


SHAPES: list[Callable[[], None]] = [
    shape_rich,
    shape_typer,
    shape_loguru,
    shape_structlog,
    shape_jsonlogger_and_stdlib,
    shape_docker,
    shape_journald,
    shape_syslog,
    shape_jupyter,
    shape_sentry,
    shape_pytest,
    shape_remote,
    shape_email,
    shape_html,
    shape_windows,
    shape_markdown,
    shape_pyyaml,
    shape_strace,
    shape_zstd,
    shape_mime,
]


# ---------------------------------------------------------------- expectations

_QUOTE = r"(?:'|&#x27;|&#39;|&apos;|\\u0027)"
# YAML's escaped line break (a backslash ending the line; ``\ `` escapes the space after it).
_SEP = r"(?:[ \t]|\\n|\r?\n[ \t>|│]*|\\\r?\n[ \t]*(?:\\ )?)+"


def message_regex(message: str) -> re.Pattern[str]:
    """The message as written by a renderer: any wrap (newline + padding/gutter) between words, quotes escaped.

    A match starts at the exception class of the line that holds the message when there is one
    (a wrapper's line: ``X: Cannot configure ...: <message>``): the line an exception line
    begins on, which a fold may end before the message (PyYAML does).
    """
    words = message.split(" ")
    parts = [re.escape(w).replace("'", _QUOTE).replace(r"\'", _QUOTE) for w in words]
    same_line = r"(?:[^\n\\]|\\\r?\n[ \t]*(?:\\ )?)*?"
    return re.compile(r"(?:[\w.]+(?:Error|Exception):" + same_line + ")?" + _SEP.join(parts))


def expected_lines(data: bytes, message: str) -> list[int]:
    # Colour codes (raw or JSON-escaped) sit between words of a highlighted message: drop them
    # without changing any line's number.
    text = re.sub(r"(?:\x1b|\\u001b)\[[0-9;]*m", "", data.decode())
    starts = [m.start() for m in message_regex(message).finditer(text)]
    return [text.count("\n", 0, s) + 1 for s in starts]


def setup() -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    for rel, src in MODULES.items():
        path = PYROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(PYROOT).parents:
            init = PYROOT / parent / "__init__.py"
            if parent != Path(".") and not init.exists():
                init.write_text("")
        path.write_text(src)
    (ROOT / "corpus_cases.py").write_text(CASES_SRC)
    sys.path[:0] = [str(PYROOT), str(ROOT)]
    os.chdir(ROOT)


def main() -> None:
    setup()
    only = set(sys.argv[1:])
    for shape in SHAPES:
        if only and shape.__name__ not in only:
            continue
        shape()
    expectations: dict[str, object] = {}
    old_path = HERE / "expectations.json"
    if only and old_path.exists():
        expectations = json.loads(old_path.read_text())
    for name, (data, case, note) in sorted(OUT.items()):
        (HERE / name).write_bytes(data)
        exp = EXPECT.get(case)
        if name.endswith("_nbconvert_script.py") or (
            note.startswith("pytest --tb=no -rA") and "-vv" not in note
        ):
            # Code only / a summary line pytest cut short with "...": nothing a record can explain exactly.
            exp = None
        if exp is None:
            expectations[name] = {"case": case, "shape": note, "negative": True, "matches": []}
            continue
        lines = LINES_OF.get(name, expected_lines)(data, str(exp["message"]))
        if not lines:
            print(f"WARNING: {name}: message not found", file=sys.stderr)
        expectations[name] = {
            "case": case,
            "shape": note,
            "matches": [
                {
                    "id": exp["id"],
                    "captures": exp["captures"],
                    "occurrences": len(lines),
                    "lines": sorted(set(lines)),
                }
            ],
        }
    (HERE / "expectations.json").write_text(
        json.dumps(dict(sorted(expectations.items())), indent=2) + "\n"
    )
    freeze = subprocess.run([PY, "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    (HERE / "VERSIONS.txt").write_text(
        f"python {sys.version.split()[0]}\n"
        f"journald: {subprocess.run(['journalctl', '--version'], capture_output=True, text=True).stdout.splitlines()[0]}"
        " (real systemd-journald started in the sandbox; logs written with systemd-cat, read with journalctl -o MODE)\n"
        "docker json-file, RFC 5424 syslog, email (72-column wrap, > quoting) and HTML issue pages are encoded\n"
        "faithfully by make_corpus.py (no docker engine, syslog daemon, mail client or browser runs here);\n"
        "their content is the real traceback text printed by the interpreter. The Windows CRLF logs are the\n"
        "interpreter's traceback with its frame paths rewritten to a Windows install's and CRLF line ends.\n"
        "nbconvert --to rst needs pandoc (not installed): Markdown, HTML and script are the nbconvert outputs.\n\n"
        "# pip freeze of the renderer venv\n" + freeze
    )
    print(f"wrote {len(OUT)} files")


if __name__ == "__main__":
    main()
