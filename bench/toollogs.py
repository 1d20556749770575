"""Labelled logs of real tool output for the accuracy benchmark (issue 45).

Nothing here writes a log line itself. Each log is the output of a real tool run at bench time
over a small generated program whose code raises *planted* errors (``Plant``), three kinds:

* ``record``: a record of the knowledge base (a real, extracted one, never a variant), its
  template rendered with values of its slot kinds (``bench.logs.Planter``, the oracle guarding
  collisions) and raised by real Python from a file whose path ends with the record's
  ``filePath`` (the raise on the record's ``lineNumber``, in the function its source names),
  with the record's ``errorClass`` (a builtin class, or one defined there whose ``__module__``
  is the record's module): frames, class and message agree with the record;
* ``sibling``: a real-shaped message of a library whose code is *not* in the knowledge base
  (sglang, vLLM, DeepSpeed, PEFT, Ray, slurm, docker ...) resembling records that are, raised
  the same way from that library's file, or printed as the line the tool prints (``srun:
  error: ...``); a sibling whose package is in the knowledge base and one of that package's
  records matches it is left out (it would be right, not a near miss);
* ``interpreter``: an error the interpreter raises by itself (``NameError: name 'pipe' is not
  defined``, ``KeyError: 'model'``, ``TypeError: unsupported operand ...``) in application
  code: a record matching it comes from the wrong source.

The tools (each one ``Tool``; those that cannot run here are reported, not faked): ``pytest -v
-rA`` over a generated test module; uvicorn serving a FastAPI app and gunicorn serving a Flask
app on loopback, each requested once per plant; Werkzeug's debugger page and Django's technical
500 page (the real libraries' HTML, one page a log); ``strace -f -e write`` of a Python process
printing tracebacks; ``pip install -v`` of a project whose ``setup.py`` raises, then of a
requirement no index has; ``jupyter nbconvert --execute --to html`` of a notebook whose cells
raise (an HTML export); ``torchrun`` with two gloo processes on CPU, each raising.

Labels are found in the output, not assumed: a plant's lines are every line holding its printed
message (plain, HTML-escaped, or C-escaped as strace prints it). ``<set>/labels.json`` holds,
per log, each plant with its kind, record, expected captures and lines; a plant whose message
the tool did not print is kept with no lines (and not counted in recall).
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import html
import importlib.util
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Bump when generation changes: cached log sets of another version are rebuilt.
TOOLLOGS_VERSION = 4
PYTHON = sys.executable


class PlantKind(enum.StrEnum):
    RECORD = "record"
    SIBLING = "sibling"
    INTERPRETER = "interpreter"


@dataclass(frozen=True)
class Sibling:
    """A near-miss message of a library whose code is not in the knowledge base."""

    package: str  #: the library that prints it
    path: str  #: the file it is raised from (a line sibling: "")
    cls: str  #: its class as printed ("" for a line the tool prints itself)
    message: str


#: Near-miss siblings, after messages these projects print (sglang, vLLM, slurm, ...). Each
#: resembles generic records that *are* in the knowledge base (pydantic's ``Expected {...}``,
#: setuptools' ``error: {...}``, mypy's ``Unknown {} {}``, distlib's ``no %s found in %s``).
SIBLINGS: tuple[Sibling, ...] = (
    Sibling("sglang", "sglang/srt/layers/linear.py", "ValueError",
            "Expected scalar scale for fused-in-checkpoint QKV checkpoint load of layer "
            "model.layers.0.self_attn.qkv_proj, got a tensor of shape torch.Size([3])"),
    Sibling("sglang", "sglang/srt/model_executor/model_runner.py", "RuntimeError",
            "Not enough memory. Please try to increase --mem-fraction-static."),
    Sibling("vllm", "vllm/worker/worker.py", "ValueError",
            "The model's max seq len (32768) is larger than the maximum number of tokens that "
            "can be stored in KV cache (21648). Try increasing `gpu_memory_utilization` or "
            "decreasing `max_model_len` when initializing the engine."),
    Sibling("vllm", "vllm/model_executor/layers/quantization/__init__.py", "ValueError",
            "Unknown quantization method: fp6. Must be one of ['aqlm', 'awq', 'fp8', 'gptq']."),
    Sibling("vllm", "vllm/v1/engine/core_client.py", "RuntimeError",
            "Engine core initialization failed. See root cause above. Failed core proc(s): {}"),
    Sibling("vllm", "vllm/config.py", "ValueError",
            "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
            "Tesla T4 GPU has compute capability 7.5."),
    Sibling("deepspeed", "deepspeed/runtime/config.py", "AssertionError",
            "Micro batch size per gpu: 0 has to be greater than 0"),
    Sibling("peft", "peft/tuners/tuners_utils.py", "ValueError",
            "Target modules {'c_attn'} not found in the base model. Please check the target "
            "modules and try again."),
    Sibling("accelerate", "accelerate/state.py", "ValueError",
            "fp16 mixed precision requires a GPU (not 'mps')."),
    Sibling("ray", "ray/_private/serialization.py", "RaySystemError",
            "System error: Failed to unpickle serialized exception"),
    Sibling("bitsandbytes", "bitsandbytes/cextension.py", "RuntimeError",
            "CUDA Setup failed despite GPU being available. Please run the following command "
            "to get more information: python -m bitsandbytes"),
    Sibling("megatron", "megatron/core/parallel_state.py", "RuntimeError",
            "world_size (6) is not divisible by tensor_model_parallel_size (4) x "
            "pipeline_model_parallel_size (1)"),
    Sibling("diffusers", "diffusers/models/modeling_utils.py", "ValueError",
            "Cannot load <class 'diffusers.models.unets.unet_2d_condition.UNet2DConditionModel'>"
            " from /models/sdxl because the following keys are missing: conv_in.weight."),
    Sibling("torchao", "torchao/float8/inference.py", "ValueError",
            "Invalid scaling configuration. - For TensorWise scaling, a and b should be float8, "
            "scales should be float and singletons."),
    Sibling("safetensors", "safetensors/torch.py", "OSError",
            "No such file or directory: no model.safetensors found in /models/phi-4 "
            "(checked 3 shards)"),
    Sibling("slurm", "", "", "srun: error: node-07: tasks 0-3: Exited with exit code 1"),
    Sibling("slurm", "", "",
            "srun: error: Unable to allocate resources: Invalid account or account/partition "
            "combination specified"),
    Sibling("slurm", "", "",
            "slurmstepd: error: *** JOB 4412 ON node-07 CANCELLED AT 2026-08-28T05:12:44 DUE "
            "TO TIME LIMIT ***"),
    Sibling("docker", "", "",
            "Error response from daemon: pull access denied for trainer, repository does not "
            "exist or may require 'docker login'"),
    Sibling("kubectl", "", "", 'Error from server (NotFound): pods "trainer-0" not found'),
    Sibling("git", "", "",
            "fatal: not a git repository (or any of the parent directories): .git"),
)  # fmt: skip


@dataclass(frozen=True)
class InterpreterError:
    """Application code whose error the interpreter raises itself."""

    name: str  #: the function holding it
    body: str  #: its body (one statement or more, 4-space indented by the generator)


INTERPRETER_ERRORS: tuple[InterpreterError, ...] = (
    InterpreterError("generate", "return pipe(prompt)"),  # noqa: RUF100
    InterpreterError("load_config", "cfg = {}\nreturn cfg['model']"),
    InterpreterError("total_tokens", "return 1 + '2'"),
    InterpreterError("output_shape", "out = None\nreturn out.shape"),
    InterpreterError("first_shard", "shards = []\nreturn shards[3]"),
    InterpreterError("parse_port", "return int('80a')"),
    InterpreterError("attention", "import flash_attn_missing_in_bench  # noqa: F401"),
    InterpreterError("mean_loss", "losses = []\nreturn sum(losses) / len(losses)"),
    InterpreterError("concat_name", "return 'rank-' + 3"),
    InterpreterError("count_items", "return len(5)"),
    InterpreterError("parse_lr", "return float('3e-4x')"),
    InterpreterError("split_pair", "a, b = [1, 2, 3]\nreturn a"),
    InterpreterError("read_settings", "with open('/nonexistent/bench/settings.yaml') as f:\n"
                     "    return f.read()"),
    InterpreterError("hf_token", "import os\nreturn os.environ['HF_TOKEN_FOR_BENCH']"),
    InterpreterError("to_upper", "name = 'qwen'\nreturn name.uppercase()"),
    InterpreterError("fmt_row", "return '{} {}'.format('a')"),
)  # fmt: skip


@dataclass(frozen=True)
class Plant:
    """One planted error: what raises it, what it prints, what errkb should answer."""

    key: str
    kind: PlantKind
    printed: str  #: the line it prints: ``Class: message`` (or the tool's own line)
    message: str  #: the message alone, as printed
    path: str  #: the raising module, absolute ("" for a printed line)
    func: str
    record: str | None = None
    captures: dict[str, str] = field(default_factory=dict)
    source: str = ""  #: the library a sibling comes from; the interpreter error's function


# ---------------------------------------------------------------------------- plant code
def _module_of(file_path: str) -> str:
    parts = Path(file_path).with_suffix("").parts
    parts = parts[1:] if parts and parts[0] in ("src", "lib", "Lib", "python") else parts
    mod = ".".join(p for p in parts if p.isidentifier())
    return mod.removesuffix(".__init__") or "app"


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.MULTILINE)


def _raising_module(cls: str, module: str, message: str, func: str, line: int) -> str:
    """A module whose ``func()`` raises ``cls(message)``, the raise on ``line`` if it can be."""
    import builtins

    # The message is a constant, so the raise line a traceback quotes does not repeat it.
    head = ["# Generated by bench.toollogs: raises one planted error.", f"MESSAGE = {message!r}"]
    builtin = getattr(builtins, cls, None)
    if not (isinstance(builtin, type) and issubclass(builtin, BaseException)):
        base = "Warning" if cls.endswith("Warning") else "Exception"
        head += [f"class {cls}({base}):", "    pass", "", "", f"{cls}.__module__ = {module!r}", ""]
    head.append(f"def {func}():")
    pad = max(0, line - len(head) - 1)
    return "\n".join([*head, *["    # ..." for _ in range(pad)], f"    raise {cls}(MESSAGE)"])


def _interpreter_module(err: InterpreterError) -> str:
    body = "\n".join("    " + ln for ln in err.body.splitlines())
    return f"# Application code (bench.toollogs).\n\n\ndef {err.name}(prompt=None):\n{body}\n"


def _printed(root: Path, path: Path, func: str) -> tuple[str, str] | None:
    """Run the generated module's ``func`` here: (last printed line, message), or None."""
    spec = importlib.util.spec_from_file_location(f"_bench_plant_{path.stem}", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        getattr(module, func)()
    except Exception as exc:
        line = traceback.format_exception_only(exc)[-1].rstrip("\n")
        if "\n" in line or ": " not in line:
            return None
        return line, line.split(": ", 1)[1]
    return None


def make_plants(
    root: Path,
    rng: random.Random,
    records: Sequence[dict[str, Any]],
    rendered: Callable[[dict[str, Any]], tuple[str, dict[str, str]] | None],
    *,
    n_records: int,
    n_siblings: int,
    n_interpreter: int,
    must: Sequence[dict[str, Any]] = (),
    sibling_ok: Callable[[Sibling], bool] = lambda _s: True,
) -> list[Plant]:
    """Write the raising modules under ``root`` and return the plants (see the module doc).

    ``records`` are the candidates (tried in a random order, ``must`` first); ``rendered``
    gives a record's message and expected captures (None: not plantable).
    """
    plants: list[Plant] = []
    order = list(must) + rng.sample(list(records), len(records))
    seen: set[str] = set()
    for record in order:
        if sum(p.kind is PlantKind.RECORD for p in plants) >= n_records:
            break
        cls = (record.get("errorClass") or "").rsplit(".", 1)[-1]
        if record["id"] in seen or not _IDENT.match(cls) or cls in ("KeyError",):
            continue  # KeyError prints its message as a repr: not the template's text
        seen.add(record["id"])
        got = rendered(record)
        if got is None:
            continue
        message, captures = got
        key = f"r{len(plants)}"
        # A package's filePath is relative to the package itself (bench.corpus extracts each
        # one from its own directory): installed, it lives under its name.
        package = record["repo"].removeprefix("pypi/") if record["repo"].startswith("pypi/") else ""
        if record["filePath"] == f"{package}.py":  # a single-module distribution (six.py)
            package = ""
        path = root / key / "site-packages" / package / record["filePath"]
        if record["repo"] == "python/cpython":
            path = root / key / "lib" / "python3.11" / record["filePath"]
        names = _DEF.findall(record.get("sourceCode") or "")
        func = names[-1] if names and names[-1].isidentifier() else "_raise"
        path.parent.mkdir(parents=True, exist_ok=True)
        module = _module_of(f"{package}/{record['filePath']}" if package else record["filePath"])
        path.write_text(
            _raising_module(cls, module, message, func, int(record.get("lineNumber") or 0)),
            encoding="utf-8",
        )
        out = _printed(root, path, func)
        if out is None or out[1] != message:
            shutil.rmtree(root / key)
            continue
        plants.append(
            Plant(key, PlantKind.RECORD, out[0], message, str(path), func, record["id"], captures)
        )
    siblings = [s for s in SIBLINGS if sibling_ok(s)]
    for sib in rng.sample(siblings, min(n_siblings, len(siblings))):
        key = f"s{len(plants)}"
        if not sib.path:
            plants.append(
                Plant(key, PlantKind.SIBLING, sib.message, sib.message, "", "", source=sib.package)
            )
            continue
        path = root / key / "site-packages" / sib.path
        path.parent.mkdir(parents=True, exist_ok=True)
        module = _module_of(sib.path)
        line = rng.randrange(40, 900)
        path.write_text(_raising_module(sib.cls, module, sib.message, "load", line), "utf-8")
        out = _printed(root, path, "load")
        if out is None:
            continue
        plants.append(
            Plant(key, PlantKind.SIBLING, out[0], out[1], str(path), "load", source=sib.package)
        )
    for err in rng.sample(INTERPRETER_ERRORS, min(n_interpreter, len(INTERPRETER_ERRORS))):
        key = f"i{len(plants)}"
        path = root / key / "app" / "service" / f"{err.name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_interpreter_module(err), encoding="utf-8")
        out = _printed(root, path, err.name)
        if out is None:
            continue
        plants.append(
            Plant(key, PlantKind.INTERPRETER, out[0], out[1], str(path), err.name, source=err.name)
        )
    return plants


_RUNTIME = '''"""Generated by bench.toollogs: trigger(key) raises (or prints) one planted error."""
import importlib.util
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "plants.json"), encoding="utf-8") as _fh:
    PLANTS = json.load(_fh)


def trigger(key):
    info = PLANTS[key]
    if not info["path"]:
        print(info["line"], file=sys.stderr, flush=True)
        return
    spec = importlib.util.spec_from_file_location("_plant_" + key, info["path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    getattr(module, info["func"])()
'''


def write_runtime(work: Path, plants: Sequence[Plant]) -> None:
    """``plantrt.py`` and ``plants.json`` in ``work``: what the tools' programs import."""
    (work / "plantrt.py").write_text(_RUNTIME, encoding="utf-8")
    # Only a printed line's text: an error page showing this frame's locals must not show a
    # raised plant's message (version 1 did, and its line counted as the plant's).
    table = {
        p.key: {"path": p.path, "func": p.func} if p.path else {"path": "", "line": p.printed}
        for p in plants
    }
    (work / "plants.json").write_text(json.dumps(table), encoding="utf-8")


# ---------------------------------------------------------------------------- tools
@dataclass(frozen=True)
class ToolRun:
    """What one tool printed: one or more logs (name -> text) and the plants each holds."""

    logs: dict[str, tuple[str, list[str]]]


@dataclass(frozen=True)
class Context:
    work: Path
    sources: Path
    env: dict[str, str]


def _env(work: Path, sources: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ERRKB_", "PYTEST"))}
    env["PYTHONPATH"] = f"{work}{os.pathsep}{sources}"
    env["NO_COLOR"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PATH"] = f"{sources / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # ``pip install --target`` puts nbconvert's templates and kernel specs under share/.
    env["JUPYTER_PATH"] = str(sources / "share" / "jupyter")
    return env


def _run(cmd: Sequence[str], ctx: Context, timeout: float = 300) -> str:
    proc = subprocess.run(
        list(cmd),
        cwd=ctx.work,
        env=ctx.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        check=False,
    )
    return proc.stdout.decode("utf-8", "replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(cmd: Sequence[str], ctx: Context, port: int, paths: Sequence[str]) -> str:
    """Start a server, request each path once, stop it (SIGINT), return what it printed."""
    out = ctx.work / f"server-{port}.out"
    with out.open("wb") as fh:
        proc = subprocess.Popen(
            list(cmd), cwd=ctx.work, env=ctx.env, stdout=fh, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                if proc.poll() is not None:
                    break
                time.sleep(0.2)
            for p in paths:
                with contextlib.suppress(urllib.error.URLError, OSError):
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/{p}", timeout=30).read()
            time.sleep(0.5)
        finally:
            proc.send_signal(2)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return out.read_text(encoding="utf-8", errors="replace")


def tool_pytest(ctx: Context, keys: Sequence[str], tb: str) -> str:
    tests = ["import plantrt", "", ""]
    for i, key in enumerate(keys):
        tests += [f"def test_step_{i}_ok():", f"    assert {i} + 1 == {i + 1}", "", ""]
        tests += [f"def test_case_{key}():", f"    plantrt.trigger({key!r})", "", ""]
    (ctx.work / "test_pipeline.py").write_text("\n".join(tests), encoding="utf-8")
    (ctx.work / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return _run(
        [PYTHON, "-m", "pytest", "-v", "-rA", f"--tb={tb}", "-p", "no:cacheprovider",
         "-c", "pytest.ini", "test_pipeline.py"],
        ctx,
    )  # fmt: skip


def tool_uvicorn(ctx: Context, keys: Sequence[str]) -> str:
    (ctx.work / "asgi_app.py").write_text(
        "from fastapi import FastAPI\nimport plantrt\n\napp = FastAPI()\n\n\n"
        '@app.get("/run/{key}")\ndef run(key: str):\n    plantrt.trigger(key)\n'
        '    return {"ok": True}\n',
        encoding="utf-8",
    )
    port = _free_port()
    cmd = [PYTHON, "-m", "uvicorn", "asgi_app:app", "--host", "127.0.0.1", "--port", str(port)]
    return _serve(cmd, ctx, port, [f"run/{k}" for k in keys])


def tool_gunicorn(ctx: Context, keys: Sequence[str]) -> str:
    (ctx.work / "wsgi_app.py").write_text(
        "from flask import Flask\nimport plantrt\n\napp = Flask('trainer_api')\n\n\n"
        '@app.route("/run/<key>")\ndef run(key):\n    plantrt.trigger(key)\n    return "ok"\n',
        encoding="utf-8",
    )
    port = _free_port()
    cmd = [PYTHON, "-m", "gunicorn", "-w", "1", "-b", f"127.0.0.1:{port}",
           "--access-logfile", "-", "wsgi_app:app"]  # fmt: skip
    return _serve(cmd, ctx, port, [f"run/{k}" for k in keys])


_PAGES = '''"""Generated by bench.toollogs: render error pages with the real libraries."""
import sys
import plantrt

kind, out_dir, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
if kind == "werkzeug":
    from werkzeug.debug import DebuggedApplication
    from werkzeug.test import Client

    def app(environ, start_response):
        plantrt.trigger(environ["PATH_INFO"].strip("/"))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    client = Client(DebuggedApplication(app, evalex=False))
    for key in keys:
        page = client.get("/" + key).get_data(as_text=True)
        with open(f"{out_dir}/{key}.html", "w", encoding="utf-8") as fh:
            fh.write(page)
else:
    import django
    from django.conf import settings
    from django.urls import path

    from django.http import HttpResponse

    def view(request, key):
        plantrt.trigger(key)
        return HttpResponse("ok")

    urlpatterns = [path("run/<str:key>/", view)]
    settings.configure(
        DEBUG=True, ROOT_URLCONF=__name__, ALLOWED_HOSTS=["*"], SECRET_KEY="bench-only",
        MIDDLEWARE=[], INSTALLED_APPS=[], TEMPLATES=[], USE_TZ=True, LOGGING_CONFIG=None,
    )
    django.setup()
    from django.test import Client

    client = Client(raise_request_exception=False)
    for key in keys:
        page = client.get(f"/run/{key}/").content.decode("utf-8")
        with open(f"{out_dir}/{key}.html", "w", encoding="utf-8") as fh:
            fh.write(page)
'''


def tool_pages(ctx: Context, kind: str, keys: Sequence[str]) -> dict[str, str]:
    (ctx.work / "pages.py").write_text(_PAGES, encoding="utf-8")
    out = ctx.work / f"pages-{kind}"
    out.mkdir(exist_ok=True)
    printed = _run([PYTHON, "pages.py", kind, str(out), *keys], ctx)
    pages = {k: (out / f"{k}.html") for k in keys}
    missing = [k for k, p in pages.items() if not p.exists()]
    if missing:
        raise ToolFailed(f"{kind} pages: {missing} not written:\n{printed[-2000:]}")
    return {k: p.read_text(encoding="utf-8") for k, p in pages.items()}


def tool_strace(ctx: Context, keys: Sequence[str]) -> str:
    strace = shutil.which("strace")
    if strace is None:
        raise ToolFailed("strace is not installed")
    (ctx.work / "worker.py").write_text(
        "import traceback\nimport plantrt\n\nfor key in " + repr(list(keys)) + ":\n"
        "    print(f'processing {key}', flush=True)\n"
        "    try:\n        plantrt.trigger(key)\n    except Exception:\n"
        "        traceback.print_exc()\n",
        encoding="utf-8",
    )
    trace = ctx.work / "strace.out"
    _run([strace, "-f", "-qq", "-s", "4096", "-e", "trace=write", "-o", str(trace),
          PYTHON, "worker.py"], ctx)  # fmt: skip
    if not trace.exists():
        raise ToolFailed("strace wrote nothing")
    return trace.read_text(encoding="utf-8", errors="replace")


def tool_pip(ctx: Context, keys: Sequence[str]) -> str:
    texts = []
    for key in keys:
        proj = ctx.work / f"proj-{key}"
        proj.mkdir(exist_ok=True)
        (proj / "setup.py").write_text(
            "import plantrt\n\nplantrt.trigger(" + repr(key) + ")\n\n"
            "from setuptools import setup\n\nsetup(name='bench-ext', version='0.1')\n",
            encoding="utf-8",
        )
        texts.append(
            _run([PYTHON, "-m", "pip", "install", "-v", "--no-build-isolation", "--no-deps",
                  "--no-index", "--target", str(ctx.work / "pip-target"), str(proj)], ctx)
        )  # fmt: skip
    empty = ctx.work / "no-wheels"
    empty.mkdir(exist_ok=True)
    texts.append(
        _run([PYTHON, "-m", "pip", "install", "-v", "--no-index", "--find-links", str(empty),
              "--target", str(ctx.work / "pip-target"), "flash-attn-bench==9.9"], ctx)
    )  # fmt: skip
    return "".join(texts)


def tool_nbconvert(ctx: Context, keys: Sequence[str]) -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "# Training run report"},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "import plantrt\nprint('loaded')"},
    ]  # fmt: skip
    for key in keys:
        cells.append(
            {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
             "source": f"plantrt.trigger({key!r})"}
        )  # fmt: skip
    nb = {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                    "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    (ctx.work / "report.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    printed = _run(
        [PYTHON, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", "--allow-errors",
         "report.ipynb"], ctx)  # fmt: skip
    page = ctx.work / "report.html"
    if not page.exists():
        raise ToolFailed(f"nbconvert wrote no page:\n{printed[-2000:]}")
    return page.read_text(encoding="utf-8")


def tool_torchrun(ctx: Context, keys: Sequence[str]) -> str:
    (ctx.work / "train_ddp.py").write_text(
        "import os\nimport torch.distributed as dist\n"
        "from torch.distributed.elastic.multiprocessing.errors import record\nimport plantrt\n\n"
        f"KEYS = {list(keys)!r}\n\n\n@record\ndef main():\n"
        "    dist.init_process_group('gloo')\n    rank = dist.get_rank()\n"
        "    print(f'rank {rank} ready', flush=True)\n    dist.barrier()\n"
        "    plantrt.trigger(KEYS[rank % len(KEYS)])\n\n\nmain()\n",
        encoding="utf-8",
    )
    port = _free_port()
    return _run(
        [PYTHON, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         f"--master-port={port}", "train_ddp.py"], ctx, timeout=600)  # fmt: skip


class ToolFailed(Exception):
    """A tool could not run here (not installed, failed to start): left out, and said so."""


# ---------------------------------------------------------------------------- labels
def plant_lines(text: str, plant: Plant) -> list[int]:
    """1-based lines of ``text`` holding the plant's message as some tool prints it."""
    msg = plant.message
    forms = {
        msg,
        html.escape(msg, quote=True),
        html.escape(msg, quote=False),
        html.escape(msg, quote=True).replace("&#x27;", "&#39;"),
        msg.replace("\\", "\\\\").replace('"', '\\"'),
    }
    # A short message ('model') is also source text: its line must name the class too.
    cls = plant.printed.split(": ", 1)[0].rsplit(".", 1)[-1] if len(msg) < 20 else ""
    return [
        i
        for i, line in enumerate(text.split("\n"), 1)
        if any(f and f in line for f in forms) and (not cls or cls in line)
    ]


# ---------------------------------------------------------------------------- a set
#: How many plants of each kind a set holds, and which tool gets how many.
SET_PLAN = {"records": 26, "siblings": 14, "interpreter": 12}
TOOL_SHARE = (
    ("pytest", 12), ("uvicorn", 6), ("gunicorn", 6), ("werkzeug", 3), ("django", 3),
    ("strace", 5), ("pip", 1), ("nbconvert", 5), ("torchrun", 2),
)  # fmt: skip
PYTEST_TB = ("long", "short", "native")
PAGE_TOOLS = ("werkzeug", "django")
#: The packages each tool runs: a record of one of them answering on the tool's own text (for
#: drci: at one of its real exceptions) may well be right (pip's ``No matching distribution
#: found for {}`` on pip's output), so the scorer lists it apart, unjudged.
TOOL_PACKAGES = {
    "pytest": ("_pytest", "pytest", "pluggy"),
    "uvicorn": ("uvicorn", "fastapi", "starlette", "anyio"),
    "gunicorn": ("gunicorn", "flask", "werkzeug"),
    "werkzeug": ("werkzeug",),
    "django": ("django",),
    "strace": (),
    "pip": ("pip", "setuptools", "pkg_resources", "distutils"),
    "nbconvert": ("nbconvert", "nbclient", "jupyter_client", "ipykernel", "IPython"),
    "torchrun": ("torch",),
    # PyTorch's CI: torch's own messages at its real exceptions may well be right.
    "drci": ("torch", "torchgen", "functorch"),
}


@dataclass
class LogSet:
    """A generated set: its logs (files under ``directory``) and their labels."""

    directory: Path
    labels: dict[str, Any]

    def logs(self) -> Iterator[tuple[Path, dict[str, Any]]]:
        for name, label in self.labels["logs"].items():
            yield self.directory / name, label


def _deal(plants: Sequence[Plant], rng: random.Random) -> dict[str, list[Plant]]:
    """Share the plants among the tools (each tool a mix of kinds), in ``TOOL_SHARE``.

    A page shows the exception of its request only: a printed line (slurm's) goes elsewhere.
    """
    pool = list(plants)
    rng.shuffle(pool)
    dealt: dict[str, list[Plant]] = {}
    for tool, n in TOOL_SHARE:
        fits = [p for p in pool if p.path or tool not in PAGE_TOOLS][:n]
        dealt[tool] = fits
        pool = [p for p in pool if p not in fits]
    dealt["pytest"] += pool  # what is left goes to the suite
    return dealt


def generate_set(
    directory: Path,
    sources: Path,
    plants_for: Callable[[Path, random.Random], list[Plant]],
    seed: int,
    key: dict[str, Any],
    tools: Sequence[str] | None = None,
) -> LogSet:
    """Run every tool over a set of plants into ``directory`` (reused if ``key`` matches)."""
    labels_path = directory / "labels.json"
    key = {**key, "version": TOOLLOGS_VERSION, "seed": seed, "tools": list(tools or [])}
    if labels_path.exists():
        labels = json.loads(labels_path.read_text(encoding="utf-8"))
        if labels.get("key") == key:
            return LogSet(directory, labels)
    shutil.rmtree(directory, ignore_errors=True)
    work = directory / "work"
    work.mkdir(parents=True)
    rng = random.Random(seed)
    plants = plants_for(work / "plants", rng)
    write_runtime(work, plants)
    ctx = Context(work, sources, _env(work, sources))
    dealt = _deal(plants, rng)
    wanted = [t for t, _n in TOOL_SHARE if tools is None or t in tools]
    outputs: dict[str, tuple[str, list[Plant]]] = {}
    failed: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for tool in wanted:
        mine = dealt[tool]
        keys = [p.key for p in mine]
        started = time.monotonic()
        try:
            if tool == "pytest":
                outputs["pytest.log"] = (tool_pytest(ctx, keys, PYTEST_TB[seed % 3]), mine)
            elif tool == "uvicorn":
                outputs["uvicorn.log"] = (tool_uvicorn(ctx, keys), mine)
            elif tool == "gunicorn":
                outputs["gunicorn.log"] = (tool_gunicorn(ctx, keys), mine)
            elif tool in ("werkzeug", "django"):
                for k, page in tool_pages(ctx, tool, keys).items():
                    outputs[f"{tool}-{k}.html"] = (page, [p for p in mine if p.key == k])
            elif tool == "strace":
                outputs["strace.log"] = (tool_strace(ctx, keys), mine)
            elif tool == "pip":
                outputs["pip.log"] = (tool_pip(ctx, keys), mine)
            elif tool == "nbconvert":
                outputs["nbconvert.html"] = (tool_nbconvert(ctx, keys), mine)
            elif tool == "torchrun":
                outputs["torchrun.log"] = (tool_torchrun(ctx, keys), mine)
        except (ToolFailed, subprocess.SubprocessError, OSError) as exc:
            failed[tool] = f"{type(exc).__name__}: {exc}"[:2000]
        seconds[tool] = round(time.monotonic() - started, 1)
    logs: dict[str, Any] = {}
    for name, (text, mine) in outputs.items():
        (directory / name).write_text(text, encoding="utf-8")
        logs[name] = {
            "tool": name.split("-")[0].split(".")[0],
            "plants": [{**_plant_row(p), "lines": plant_lines(text, p)} for p in mine],
        }
    labels = {
        "key": key,
        "logs": logs,
        "failed": failed,
        "seconds": seconds,
        "plants": [_plant_row(p) for p in plants],
    }
    labels_path.write_text(json.dumps(labels, indent=2, ensure_ascii=False), encoding="utf-8")
    shutil.rmtree(work / "pip-target", ignore_errors=True)
    return LogSet(directory, labels)


def _plant_row(p: Plant) -> dict[str, Any]:
    row = asdict(p)
    row["kind"] = p.kind.value
    return row


def drci_logs(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The real CI fragments (no plants): every exact answer there is unlabelled."""
    out: list[tuple[Path, dict[str, Any]]] = []
    expected = {}
    with contextlib.suppress(OSError):
        for line in (root / "expected.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            expected[row["file"]] = row
    for path in sorted((root / "clean").glob("*.txt")):
        row = expected.get(path.name, {})
        exc_lines = [e["line"] for e in row.get("python_exceptions", [])]
        out.append((path, {"tool": "drci", "plants": [], "exceptionLines": exc_lines}))
    return out


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]
