"""tcc: a tensor compiler for ONNX models, on CPUs and NVIDIA GPUs, for inference and training.

Compile a model (a path, its bytes, or an ``onnx.ModelProto``), call it with numpy arrays or
torch tensors, save the artifact and load it again, train it::

    import numpy as np, tcc
    model = tcc.compile("model.onnx")                      # device="cpu" (or "cuda", "auto")
    (y,) = model(np.random.rand(1, 3, 224, 224).astype(np.float32))
    model.save("model.tcc")
    model = tcc.load("model.tcc", threads=4)

    step = tcc.compile("mlp.onnx", train=True, loss="cross-entropy", optimizer="adam",
                       batch_size=64)
    trainer = tcc.Trainer(step, seed=1)
    loss = trainer.step(images, labels, learning_rate=1e-3)

CPU tensors that support DLPack (torch tensors, among others) are passed without a copy, and
when the inputs are torch tensors the outputs are torch tensors sharing the arrays' memory. A
CUDA artifact also takes tensors in its GPU's memory (torch CUDA tensors): they move device to
device, never through the host, and the outputs are CUDA tensors.
The work happens in two C libraries the package carries: libtcc (the compiler) and libtccrt
(the runtime, which is all a deployment needs). Errors are ``tcc.TccError`` with the compiler's
or the runtime's message, naming the model node, op or input and the reason.
"""
from __future__ import annotations

import ctypes as C
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import _capi, _dlpack
from ._capi import TccError

__all__ = ["compile", "load", "train", "Model", "Trainer", "TensorSpec", "TccError", "allocator_stats",
           "empty_cache", "device_available", "runtime_version", "compiler_version"]
__version__ = "0.2.0"


@dataclass(frozen=True)
class TensorSpec:
    """A tensor a program takes or returns: its name, numpy dtype and shape. ``dtype_name`` is
    the element type's own name ("bfloat16" travels as numpy's uint16 bit patterns, the float8
    types as uint8 bit patterns, "int4"/"uint4"/"int2"/"uint2" as a byte each, as ml_dtypes holds
    them: ``array.view(np.uint8)`` of an ml_dtypes float8 array is what a model takes)."""
    name: str
    dtype: np.dtype
    shape: tuple
    dtype_name: str

    @staticmethod
    def _from(info: _capi.TensorInfo) -> "TensorSpec":
        return TensorSpec(info.name.decode(), _capi.DTYPES[info.dtype],
                          tuple(info.shape[k] for k in range(info.rank)),
                          _capi.DTYPE_NAMES[info.dtype])


def _specs(count: int, query) -> list[TensorSpec]:
    specs = []
    for i in range(count):
        info = _capi.TensorInfo()
        _capi.check(query(C.c_size_t(i), C.byref(info)))
        specs.append(TensorSpec._from(info))
    return specs


def _is_torch(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


def _as_array(value: Any, spec: TensorSpec, what: str) -> np.ndarray:
    """`value` as a C-contiguous array of spec's dtype and shape: numpy arrays as they are,
    DLPack CPU tensors as zero-copy views, Python numbers and lists converted. A copy is made only
    to make a strided array contiguous."""
    if isinstance(value, np.ndarray):
        array = value
    elif hasattr(value, "__dlpack__"):
        if hasattr(value, "__dlpack_device__") and value.__dlpack_device__()[0] != 1:
            raise TccError(f"{what} ('{spec.name}') is on DLPack device "
                           f"{tuple(value.__dlpack_device__())}, not the host: tcc takes host "
                           "tensors (a CUDA artifact copies them to its GPU)")
        if _is_torch(value) and getattr(value, "requires_grad", False):
            value = value.detach()
        array = np.from_dlpack(value)
    else:
        array = np.asarray(value, dtype=spec.dtype)
    if array.dtype != spec.dtype:
        raise TccError(f"{what} ('{spec.name}') is {array.dtype}, the model expects "
                       f"{spec.dtype_name} (convert it with .astype)")
    if tuple(array.shape) != spec.shape:
        raise TccError(f"{what} ('{spec.name}') has shape {tuple(array.shape)}, the model was "
                       f"compiled for {spec.shape}")
    return np.ascontiguousarray(array)


def _bind(values: Sequence[Any], specs: Sequence[TensorSpec], what: str) -> list[np.ndarray]:
    if len(values) != len(specs):
        names = ", ".join(s.name for s in specs)
        raise TccError(f"{len(values)} {what}s given, the program takes {len(specs)} ({names})")
    return [_as_array(v, s, f"{what} {i}") for i, (v, s) in enumerate(zip(values, specs))]


def _outputs(specs: Sequence[TensorSpec], out: Sequence[np.ndarray] | None) -> list[np.ndarray]:
    if out is None:
        return [np.empty(s.shape, s.dtype) for s in specs]
    if len(out) != len(specs):
        raise TccError(f"out has {len(out)} arrays, the program returns {len(specs)}")
    for i, (o, s) in enumerate(zip(out, specs)):
        if (not isinstance(o, np.ndarray) or o.dtype != s.dtype or tuple(o.shape) != s.shape
                or not o.flags.c_contiguous or not o.flags.writeable):
            raise TccError(f"out[{i}] must be a writeable C-contiguous {s.dtype_name} array of "
                           f"shape {s.shape}")
    return list(out)


def _address(array: np.ndarray) -> int:
    return array.ctypes.data


def _as_torch(arrays: list[np.ndarray]) -> list:
    import torch  # only when the caller gave torch tensors
    return [torch.from_numpy(a) for a in arrays]


def _read_model(model: Any) -> tuple[str | None, bytes | None]:
    """(path, None) or (None, bytes) of an ONNX model given as a path, bytes or a ModelProto."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return None, bytes(model)
    if hasattr(model, "SerializeToString"):
        return None, model.SerializeToString()
    raise TypeError(f"model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def _option_strings(options: Mapping[str, Any]) -> list[bytes]:
    out = []
    for key, value in options.items():
        if value is None:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, bool):
                v = int(v)
            out.append(f"{key}={v}".encode())
    return out


class Model:
    """A compiled program loaded into the runtime: call it with the inputs (positionally, or by
    name with keywords) to get the outputs as a list. ``inputs`` and ``outputs`` describe them.
    One call at a time per Model; different Models run concurrently (the GIL is released while
    the program runs)."""

    def __init__(self, artifact: bytes, *, threads: int = 0, cuda_graph: bool = False,
                 device_ordinal: int = 0, report: dict | None = None, defer_load: bool = False):
        self._lib = _capi.runtime()
        self._device_ordinal = device_ordinal
        self._options = _capi.Options(threads, int(cuda_graph), device_ordinal)
        self._handle = None
        self.artifact = bytes(artifact)
        #: The compile report (kernels, library calls, arena and constant bytes, compile time;
        #: ``tcc compile --report``'s JSON) for a model compiled here, else None.
        self.report = report
        if not defer_load:
            self._program  # noqa: B018 (loads it: a damaged artifact fails here)

    @property
    def _program(self) -> C.c_void_p:
        """The program in the runtime, loaded on first use where compile() made it for a device
        this process cannot run (so that it can still be saved)."""
        if self._handle is None:
            handle = C.c_void_p()
            _capi.check(self._lib.tccrt_load_buffer(self.artifact, len(self.artifact),
                                                    C.byref(self._options), C.byref(handle)),
                        "loading the artifact")
            lib = self._lib
            self._handle = handle
            self._read_specs()
        return self._handle

    def _read_specs(self) -> None:
        lib, handle = self._lib, self._handle
        self._inputs = _specs(lib.tccrt_num_inputs(handle),
                              lambda i, o: lib.tccrt_input_info(handle, i, o))
        self._outputs = _specs(lib.tccrt_num_outputs(handle),
                               lambda i, o: lib.tccrt_output_info(handle, i, o))

    @property
    def symbols(self) -> dict[str, tuple[int, int]]:
        """The size symbols of a program compiled with size ranges (``input_shapes={"ids":
        ((1, 8), (1, 512))}``), each with its inclusive range (the maximum is 2**63 - 1 where
        none was given); empty for a program of fixed sizes."""
        lib, handle = self._lib, self._program
        out = {}
        for k in range(lib.tccrt_num_symbols(handle)):
            name, lo, hi = C.c_char_p(), C.c_int64(), C.c_int64()
            _capi.check(lib.tccrt_symbol_info(handle, k, C.byref(name), C.byref(lo), C.byref(hi)),
                        "symbols")
            out[name.value.decode()] = (lo.value, hi.value)
        return out

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena the program's temporaries live in; a symbolic program's is planned
        for the sizes of the last call (0 before the first)."""
        return self._lib.tccrt_arena_bytes(self._program)

    def input_dims(self, i: int) -> tuple:
        """Input i's dims: an int where fixed, the size expression (a str such as "batch" or
        "2*seq") where symbolic."""
        handle = self._program
        spec = self.inputs[i]
        return tuple((e.decode() if (e := self._lib.tccrt_input_dim_expr(handle, i, d)) else n)
                     for d, n in enumerate(spec.shape))

    def set_input_shapes(self, *shapes: Sequence[int]) -> None:
        """Binds the sizes of a symbolic program for the next calls (one shape per input, in
        order); ``inputs`` and ``outputs`` then give the bound shapes. Calls bind the shapes of
        their inputs themselves: this is for preparing output arrays (``out=``) ahead. A size
        outside the compiled ranges is a TccError naming the input, the dim and the range."""
        handle = self._program
        arrays = [(C.c_int64 * max(len(s), 1))(*[int(d) for d in s]) for s in shapes]
        ranks = (C.c_size_t * max(len(shapes), 1))(*[len(s) for s in shapes])
        rows = (C.POINTER(C.c_int64) * max(len(shapes), 1))(
            *[C.cast(a, C.POINTER(C.c_int64)) for a in arrays])
        _capi.check(self._lib.tccrt_set_input_shapes(handle, rows, ranks), "set_input_shapes")
        self._read_specs()

    @property
    def inputs(self) -> list[TensorSpec]:
        self._program  # noqa: B018
        return self._inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        self._program  # noqa: B018
        return self._outputs

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.tccrt_program_free(self._handle)
            self._handle = None

    @property
    def device(self) -> str:
        """"cpu" or "cuda"."""
        if self._handle is None and self.report:
            return self.report["device"]
        return "cuda" if self._lib.tccrt_program_device(self._program) == 1 else "cpu"

    @property
    def device_name(self) -> str:
        """What it runs on, e.g. "cpu (16 threads)" or "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, cubin)"."""
        return self._lib.tccrt_program_device_name(self._program).decode()

    @property
    def is_training(self) -> bool:
        """A training artifact (compile(..., train=True)): run it with a Trainer."""
        return bool(self._lib.tccrt_is_training(self._program))

    def set_threads(self, threads: int) -> None:
        """CPU threads for the program's kernels and library calls (0: all cores)."""
        _capi.check(self._lib.tccrt_set_num_threads(self._program, threads), "set_threads")

    def __call__(self, *inputs: Any, out: Sequence[np.ndarray] | None = None,
                 **named: Any) -> list:
        """Runs the program. Inputs are numpy arrays, DLPack CPU tensors (torch) or numbers and
        lists, of exactly the dtypes and shapes in ``inputs``; keywords give them by name. The
        outputs are new numpy arrays, or written into ``out``; torch tensors when the inputs
        are torch tensors (sharing the arrays' memory). A CUDA program also takes tensors in
        its GPU's memory (all inputs there): no host copies, torch CUDA tensors out."""
        if self.is_training:
            raise TccError("this is a training artifact: run it with tcc.Trainer(model)")
        if named:
            if inputs:
                raise TccError("give the inputs either positionally or by name, not both")
            missing = [s.name for s in self.inputs if s.name not in named]
            unknown = sorted(set(named) - {s.name for s in self.inputs})
            if missing or unknown:
                raise TccError(f"inputs by name: missing {missing}, unknown {unknown}")
            inputs = tuple(named[s.name] for s in self.inputs)
        if self.symbols and len(inputs) == len(self.inputs): # (host or GPU tensors alike)
            shapes = [tuple(v.shape) if hasattr(v, "shape") else np.shape(v) for v in inputs]
            if shapes != [s.shape for s in self.inputs]:
                self.set_input_shapes(*shapes)
        if any(_dlpack.device_of(v)[0] != _dlpack.KDL_CPU for v in inputs):
            return self._run_on_device(inputs, out)
        arrays = _bind(inputs, self.inputs, "input")
        results = _outputs(self.outputs, out)
        _capi.check(self._lib.tccrt_run(self._program,
                                        _capi.pointers([_address(a) for a in arrays]),
                                        _capi.pointers([_address(a) for a in results])), "run")
        if out is None and any(_is_torch(v) for v in inputs):
            return _as_torch(results)
        return results

    def _run_on_device(self, inputs: Sequence[Any], out: Sequence[Any] | None) -> list:
        """Inputs in GPU memory (DLPack, e.g. torch CUDA tensors): borrowed without copies
        (torch's: after one wait for its current stream; other producers': ordered before the
        program's stream by the protocol), run with tccrt_run_device; the outputs are new torch
        CUDA tensors, or the DLPack tensors given as ``out``."""
        if self.device != "cuda":
            raise TccError("this program runs on the CPU: give it host tensors (the inputs are in "
                           "GPU memory)")
        if len(inputs) != len(self.inputs):
            raise TccError(f"{len(inputs)} inputs given, the program takes {len(self.inputs)}")
        want = (_dlpack.KDL_CUDA, self._device_ordinal)
        if all(_is_torch(v) for v in inputs) and (out is None or all(_is_torch(o) for o in out)):
            # One wait for torch's stream (the run is synchronous anyway) instead of an event
            # per tensor: the tensors are then borrowed with stream -1 (no synchronisation).
            import torch
            torch.cuda.current_stream(torch.device("cuda", self._device_ordinal)).synchronize()
            stream = -1
        else:  # other producers order their work before the program's stream
            stream = self._lib.tccrt_program_cuda_stream(self._program) or 0

        def borrow(value: Any, spec: TensorSpec, what: str) -> _dlpack.DeviceTensor:
            if _dlpack.device_of(value) != want:
                raise TccError(f"{what} ('{spec.name}') is on DLPack device "
                               f"{_dlpack.device_of(value)}: give every tensor in the memory of "
                               f"the program's GPU {want}, or every one on the host")
            if _is_torch(value) and getattr(value, "requires_grad", False):
                value = value.detach()
            try:
                t = _dlpack.borrow(value, stream)
            except ValueError as e:
                raise TccError(f"{what} ('{spec.name}'): {e}") from None
            if t.dtype_name != spec.dtype_name or t.shape != spec.shape:
                raise TccError(f"{what} ('{spec.name}') is {t.dtype_name}{list(t.shape)}, the "
                               f"model expects {spec.dtype_name}{list(spec.shape)}")
            return t

        borrowed = [borrow(v, s, f"input {i}") for i, (v, s) in enumerate(zip(inputs, self.inputs))]
        if out is None:
            if not all(_is_torch(v) for v in inputs):
                raise TccError("outputs of a run on device tensors are allocated with torch; give "
                               "other frameworks' device tensors as out=[...]")
            import torch
            device = torch.device("cuda", self._device_ordinal)
            out = [torch.empty(s.shape, dtype=getattr(torch, s.dtype_name), device=device)
                   for s in self.outputs]
        elif len(out) != len(self.outputs):
            raise TccError(f"out has {len(out)} tensors, the program returns {len(self.outputs)}")
        targets = [borrow(o, s, f"out[{i}]") for i, (o, s) in enumerate(zip(out, self.outputs))]
        _capi.check(self._lib.tccrt_run_device(self._program,
                                               _capi.pointers([t.address for t in borrowed]),
                                               _capi.pointers([t.address for t in targets])),
                    "run")
        return list(out)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the artifact (what ``tcc run``, ``tccrt-run`` and libtccrt load)."""
        with open(path, "wb") as f:
            f.write(self.artifact)

    def profile(self, *inputs: Any, runs: int = 10) -> list[dict]:
        """Runs the program ``runs`` times with per-launch timing (CPU: wall clock; CUDA: the GPU
        time between timing events around each launch) and returns one
        dict per launch: kind ("kernel", "gemm", "conv", ...), name, nodes (the model nodes it
        computes), calls, total_seconds and mean_seconds, slowest first."""
        _capi.check(self._lib.tccrt_set_profiling(self._program, 1), "profile")
        try:
            for _ in range(runs):
                self(*inputs)
            rows = []
            for i in range(self._lib.tccrt_num_launches(self._program)):
                p = _capi.LaunchProfile()
                _capi.check(self._lib.tccrt_get_launch_profile(self._program, i, C.byref(p)))
                rows.append({"kind": p.kind.decode(), "name": p.name.decode(),
                             "nodes": p.nodes.decode(), "calls": p.calls,
                             "total_seconds": p.total_seconds,
                             "mean_seconds": p.total_seconds / max(p.calls, 1)})
        finally:
            _capi.check(self._lib.tccrt_set_profiling(self._program, 0), "profile")
        return sorted(rows, key=lambda r: -r["total_seconds"])

    def device_allocator_stats(self) -> dict:
        """CUDA programs: the statistics of their GPU's caching allocator (bytes allocated,
        reserved and at peak; requests, cache hits, system allocations and frees)."""
        stats = _capi.AllocatorStats()
        _capi.check(self._lib.tccrt_device_allocator_stats(self._program, C.byref(stats)),
                    "device_allocator_stats")
        return stats.as_dict()

    def __repr__(self) -> str:
        if self._handle is None:
            return f"<tcc.Model for {self.device}, not loaded yet>"
        ins = ", ".join(f"{s.name}: {s.dtype_name}{list(s.shape)}" for s in self.inputs)
        outs = ", ".join(f"{s.name}: {s.dtype_name}{list(s.shape)}" for s in self.outputs)
        kind = "training artifact" if self.is_training else f"({ins}) -> ({outs})"
        return f"<tcc.Model on {self.device_name}: {kind}>"


def compile(model: Any, *, device: str = "cpu", precision: str = "fp32", layout: str = "auto",
            input_shapes: Mapping[str, Sequence[int]] | None = None, train: bool = False,
            threads: int = 0, cuda_graph: bool = False, device_ordinal: int = 0,
            cache: bool = True, progress: bool = False, **options: Any) -> Model:
    """Compiles an ONNX model and loads the result.

    ``model``: a path (external data is read beside it), the model's bytes, or an
    ``onnx.ModelProto``. ``device``: "cpu", "cuda" (compiled with NVRTC for ``arch``, default
    "sm_80,sm_90"; it runs where a GPU is) or "auto". ``precision``: "fp32", "bf16" or "fp16"
    (matrix products in 16 bits with f32 accumulation). ``layout``: the CPU layout pass, "auto",
    "nhwc" or "nchw". ``input_shapes``: fixes dynamic input dims, e.g. ``{"x": (4, 128)}``, or
    keeps them symbolic within inclusive bounds, ``{"ids": ((1, 8), (1, 512))}`` (or
    ``"1..8"``): one CPU program for every size in them, called at any of those sizes.
    ``train=True`` makes a training artifact (run it with :class:`Trainer`); the training
    options are ``tcc compile --train``'s, as keywords: ``loss``, ``optimizer``, ``batch_size``,
    ``momentum``, ``weight_decay``, ``beta1``, ``beta2``, ``eps``, ``nesterov``,
    ``clip_grad_norm``, ``label_smoothing``, ``grad_accumulation``, ``loss_scale``,
    ``loss_scale_growth``, ``remat``, ``memory_budget``, ``trainable``, ``freeze`` (lists),
    ``mesh``, ``zero``, ``bucket_mb``, ``sharding_file``, ``micro_batches``,
    ``pipeline_schedule``. Other keywords: ``arch``, ``cache_dir``, ``jobs``, ``dump_dir``,
    ``explain_fusion``, ``explain_layout``. ``threads``, ``cuda_graph`` and ``device_ordinal``
    are how the runtime runs the result. The compile report is ``Model.report``. The runtime
    loads the artifact when it is first used, so a CUDA artifact compiled where no GPU is, or a
    distributed one (``mesh``) outside mpirun, can still be saved.
    """
    lib = _capi.compiler()
    settings = {"device": device, "precision": precision, "layout": layout, "train": train,
                "cache": cache, "progress": progress, **options}
    if input_shapes:
        def dim(d: Any) -> str:
            if isinstance(d, str):
                return d
            if isinstance(d, (tuple, list)):
                lo, hi = d
                return f"{int(lo)}..{int(hi)}"
            return str(int(d))
        settings["input_shape"] = [f"{name}={'x'.join(dim(d) for d in dims)}"
                                   for name, dims in input_shapes.items()]
    strings = _option_strings(settings)
    argv = (C.c_char_p * max(len(strings), 1))(*strings)
    path, data = _read_model(model)
    compiled = C.c_void_p()
    if path is not None:
        status = lib.tcc_compile_file(path.encode(), argv, len(strings), C.byref(compiled))
    else:
        status = lib.tcc_compile_buffer(data, len(data), None, argv, len(strings),
                                        C.byref(compiled))
    _capi.check_compiler(status)
    try:
        size = C.c_size_t()
        address = lib.tcc_compiled_artifact(compiled, C.byref(size))
        artifact = C.string_at(address, size.value)
        report = json.loads(lib.tcc_compiled_report(compiled).decode())
    finally:
        lib.tcc_compiled_free(compiled)
    # Loaded when first used: a CUDA artifact compiled where no GPU is usable, or a distributed
    # one compiled outside mpirun, can still be saved.
    return Model(artifact, threads=threads, cuda_graph=cuda_graph,
                 device_ordinal=device_ordinal, report=report, defer_load=True)


def train(model: str | os.PathLike, data: str | os.PathLike, *, lr: float, epochs: int = 1,
          seed: int | None = None, device: str = "cpu", threads: int = 0, max_steps: int = 0,
          shuffle: bool = True, checkpoint: str | os.PathLike | None = None,
          resume: str | os.PathLike | None = None, save_model: str | os.PathLike | None = None,
          step_log: str | os.PathLike | None = None, **options: Any) -> list[dict]:
    """Trains a model on a data folder, as ``tcc train MODEL --data DIR`` does, and returns the
    per-epoch metrics (``epoch``, ``train_loss``, ``test_loss``, ``test_accuracy``, ``seconds``,
    ``steps``, ``host_peak_bytes``).

    ``model``: an .onnx model (compiled for training with ``options``, :func:`compile`'s
    training keywords: ``batch_size``, ``loss``, ``optimizer``, ``momentum``...) or a training
    artifact. ``data``: IDX files (``train-images-idx3-ubyte``... as in Debian's
    dataset-fashion-mnist) or ``train_images.npy``, ``train_labels.npy``, ``test_images.npy``,
    ``test_labels.npy``. Epochs visit a seeded shuffle (``shuffle=False``: file order); the test
    set is evaluated after each; a progress bar goes to stderr. ``checkpoint``: a folder saved
    after each epoch, which ``resume`` continues from; ``save_model``: the trained ONNX model.
    For custom loops (your own data, per-step control) use :class:`Trainer`."""
    lib = _capi.compiler()
    # (_option_strings leaves the options that are None out.)
    settings: dict[str, Any] = {"device": device, "lr": lr, "epochs": epochs, "threads": threads,
                                "max_steps": max_steps, "shuffle": shuffle, "seed": seed,
                                "checkpoint": checkpoint, "resume": resume,
                                "save_model": save_model, "step_log": step_log, **options}
    with tempfile.TemporaryDirectory(prefix="tcc-train-") as work:
        metrics = Path(work) / "metrics.json"
        settings["metrics"] = str(metrics)
        strings = _option_strings(settings)
        argv = (C.c_char_p * max(len(strings), 1))(*strings)
        _capi.check_compiler(lib.tcc_train(os.fspath(model).encode(), os.fspath(data).encode(),
                                           argv, len(strings)))
        return json.loads(metrics.read_text()) if metrics.exists() else []


def load(artifact: str | os.PathLike | bytes, *, threads: int = 0, cuda_graph: bool = False,
         device_ordinal: int = 0) -> Model:
    """Loads an artifact (a .tcc file from ``tcc compile`` or ``Model.save``, or its bytes).
    Needs libtccrt only. The runtime verifies it whole before anything runs."""
    if isinstance(artifact, (str, os.PathLike)):
        with open(artifact, "rb") as f:
            artifact = f.read()
    return Model(artifact, threads=threads, cuda_graph=cuda_graph, device_ordinal=device_ordinal)


class Trainer:
    """Trains a training artifact (``compile(..., train=True)``): it owns the parameters and
    optimizer state, initialised from the artifact. A batch is the model's inputs, then the
    labels (class indices for cross-entropy, targets for MSE), as numpy arrays or CPU torch
    tensors of the shapes in ``batch_specs``. Dropout draws from a generator keyed by (seed,
    micro-step): runs are reproducible, and a resumed run continues bit-identically."""

    def __init__(self, model: Model | str | os.PathLike | bytes, *, seed: int = 0,
                 threads: int = 0):
        self.model = model if isinstance(model, Model) else load(model, threads=threads)
        if not self.model.is_training:
            raise TccError("Trainer takes a training artifact (compile(..., train=True)); "
                           "call inference models directly")
        self._lib = self.model._lib
        self._trainer = C.c_void_p()
        _capi.check(self._lib.tccrt_trainer_create(self.model._program, seed,
                                                   C.byref(self._trainer)), "Trainer")
        lib, t = self._lib, self._trainer
        self.batch_specs = _specs(lib.tccrt_trainer_num_batch_tensors(t),
                                  lambda i, o: lib.tccrt_trainer_batch_info(t, i, o))
        self.eval_specs = _specs(lib.tccrt_trainer_num_eval_outputs(t),
                                 lambda i, o: lib.tccrt_trainer_eval_info(t, i, o))
        #: The loss, optimizer and hyperparameters the artifact was compiled with.
        self.config = json.loads(lib.tccrt_training_config(self.model._program).decode() or "{}")

    def __del__(self):
        if getattr(self, "_trainer", None):
            self._lib.tccrt_trainer_free(self._trainer)
            self._trainer = None

    def step(self, *batch: Any, learning_rate: float) -> float:
        """One micro-batch: loss and gradients, and every ``grad_accumulation`` micro-batches
        the optimizer update. Returns the micro-batch's mean loss (distributed: the global
        batch's)."""
        arrays = _bind(batch, self.batch_specs, "batch tensor")
        loss = C.c_float()
        _capi.check(self._lib.tccrt_trainer_step(
            self._trainer, _capi.pointers([_address(a) for a in arrays]),
            C.c_float(learning_rate), C.byref(loss)), "step")
        return loss.value

    def eval(self, *batch: Any) -> list[np.ndarray]:
        """Evaluation without dropout or state change: the per-sample loss, and with
        cross-entropy the predicted classes."""
        arrays = _bind(batch, self.batch_specs, "batch tensor")
        results = _outputs(self.eval_specs, None)
        _capi.check(self._lib.tccrt_trainer_eval(
            self._trainer, _capi.pointers([_address(a) for a in arrays]),
            _capi.pointers([_address(r) for r in results])), "eval")
        return results

    def _state_infos(self) -> Iterable[tuple[int, TensorSpec, str]]:
        for i in range(self._lib.tccrt_trainer_num_state(self._trainer)):
            info, kind = _capi.TensorInfo(), C.c_int()
            _capi.check(self._lib.tccrt_trainer_state_info(self._trainer, i, C.byref(info),
                                                           C.byref(kind)))
            yield i, TensorSpec._from(info), _capi.STATE_KINDS[kind.value]

    def state(self, kinds: Iterable[str] = ("parameter",)) -> dict[str, np.ndarray]:
        """Copies of the state tensors of the given kinds ("parameter", "optimizer", "step",
        "grad_accumulator", "buffer", "loss_scale"), by name, in the artifact's order."""
        kinds = set(kinds)
        unknown = kinds - set(_capi.STATE_KINDS)
        if unknown:
            raise TccError(f"unknown state kinds {sorted(unknown)} (known: {_capi.STATE_KINDS})")
        out = {}
        for i, spec, kind in self._state_infos():
            if kind in kinds:
                a = np.empty(spec.shape, spec.dtype)
                _capi.check(self._lib.tccrt_trainer_get_state(self._trainer, i, _address(a)))
                out[spec.name] = a
        return out

    def set_state(self, values: Mapping[str, Any]) -> None:
        """Overwrites the named state tensors (e.g. parameters from another framework)."""
        infos = {spec.name: (i, spec) for i, spec, _ in self._state_infos()}
        unknown = sorted(set(values) - set(infos))
        if unknown:
            raise TccError(f"set_state: no state tensors named {unknown}")
        for name, value in values.items():
            i, spec = infos[name]
            a = _as_array(value, spec, "state tensor")
            _capi.check(self._lib.tccrt_trainer_set_state(self._trainer, i, _address(a)),
                        f"set_state '{name}'")

    def save(self, path: str | os.PathLike, user_data: bytes = b"") -> None:
        """Writes a checkpoint (every state tensor, the step counts, the seed and ``user_data``),
        atomically."""
        _capi.check(self._lib.tccrt_trainer_save(self._trainer, os.fspath(path).encode(),
                                                 user_data, len(user_data)), "save")

    def load(self, path: str | os.PathLike) -> bytes:
        """Restores a checkpoint (checked against this artifact first); returns its user_data."""
        _capi.check(self._lib.tccrt_trainer_load(self._trainer, os.fspath(path).encode()),
                    "load")
        data, size = C.c_void_p(), C.c_size_t()
        self._lib.tccrt_trainer_user_data(self._trainer, C.byref(data), C.byref(size))
        return C.string_at(data, size.value) if data.value else b""

    steps = property(lambda self: self._lib.tccrt_trainer_steps(self._trainer),
                     doc="Optimizer updates applied so far.")
    micro_steps = property(lambda self: self._lib.tccrt_trainer_micro_steps(self._trainer),
                           doc="Micro-batches run so far.")
    seed = property(lambda self: self._lib.tccrt_trainer_seed(self._trainer))
    grad_accumulation = property(
        lambda self: self._lib.tccrt_trainer_grad_accumulation(self._trainer))
    rank = property(lambda self: self._lib.tccrt_trainer_rank(self._trainer),
                    doc="This process's rank (distributed artifacts under mpirun; else 0).")
    world_size = property(lambda self: self._lib.tccrt_trainer_world_size(self._trainer))
    data_parallel = property(lambda self: self._lib.tccrt_trainer_data_parallel(self._trainer))
    data_position = property(lambda self: self._lib.tccrt_trainer_data_position(self._trainer))


def allocator_stats() -> dict:
    """The runtime's host caching allocator: bytes allocated now, reserved and at peak;
    requests, cache hits, system allocations and frees."""
    stats = _capi.AllocatorStats()
    _capi.runtime().tccrt_allocator_get_stats(C.byref(stats))
    return stats.as_dict()


def empty_cache() -> None:
    """Returns the host allocator's cached, unused blocks to the system."""
    _capi.runtime().tccrt_allocator_empty_cache()


def device_available(device: str = "cuda") -> tuple[bool, str]:
    """(True, "") if artifacts for ``device`` ("cpu" or "cuda") can run here, else (False,
    why), e.g. "no usable CUDA GPU/driver: libcuda.so.1 not found"."""
    codes = {"cpu": 0, "cuda": 1}
    if device not in codes:
        raise TccError(f"unknown device '{device}' (cpu or cuda)")
    reason = C.c_char_p()
    ok = _capi.runtime().tccrt_device_available(codes[device], C.byref(reason))
    return bool(ok), "" if ok else (reason.value or b"").decode()


def runtime_version() -> str:
    return _capi.runtime().tccrt_version().decode()


def compiler_version() -> str:
    return _capi.compiler().tcc_version().decode()
