"""ctypes declarations of the two C APIs the package calls: libtccrt (include/tcc/Runtime/tccrt.h:
load and run artifacts, trainers, allocators) and libtcc (include/tcc/Driver/tcc.h: compile).

The libraries are found in the package's _lib/ folder (pip install puts them there), else in
$TCC_LIBRARY_DIR (a build's lib/ folder, to use the package from a source tree). libtcc is loaded
only when something is compiled, so an install that only runs artifacts needs libtccrt alone.
"""
from __future__ import annotations

import ctypes as C
import os
from pathlib import Path

import numpy as np

c_size_p = C.POINTER(C.c_size_t)


class Options(C.Structure):
    _fields_ = [("num_threads", C.c_int), ("cuda_graph", C.c_int), ("device_ordinal", C.c_int)]


class TensorInfo(C.Structure):
    _fields_ = [("name", C.c_char_p), ("dtype", C.c_int), ("rank", C.c_int64),
                ("shape", C.POINTER(C.c_int64)), ("bytes", C.c_size_t)]


class AllocatorStats(C.Structure):
    _fields_ = [(name, C.c_uint64) for name in (
        "allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "num_allocs",
        "num_cache_hits", "num_system_allocs", "num_system_frees")]

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name, _ in self._fields_}


class LaunchProfile(C.Structure):
    _fields_ = [("kind", C.c_char_p), ("name", C.c_char_p), ("nodes", C.c_char_p),
                ("calls", C.c_uint64), ("total_seconds", C.c_double),
                ("last_start_seconds", C.c_double), ("last_seconds", C.c_double)]


# tccrt_dtype, in its order, as numpy dtypes. numpy has no bfloat16: bf16 tensors travel as
# their uint16 bit patterns; float8 tensors as their uint8 bit patterns, and 4- and 2-bit
# integers a byte each (int8 sign-extended, uint8), as ml_dtypes' arrays hold them.
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.uint16,
                                np.float32, np.float64, np.uint8, np.uint8, np.uint8, np.uint8,
                                np.uint8, np.int8, np.uint8, np.int8)]
DTYPE_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e4m3fnuz",
               "float8_e5m2", "float8_e5m2fnuz", "uint4", "int4", "uint2", "int2"]
STATE_KINDS = ["parameter", "optimizer", "step", "grad_accumulator", "buffer", "loss_scale"]


class TccError(RuntimeError):
    """What libtcc or libtccrt reported: the model node, op or input and the reason."""


def _library_dirs() -> list[Path]:
    dirs = [Path(__file__).resolve().parent / "_lib"]
    if os.environ.get("TCC_LIBRARY_DIR"):
        dirs.append(Path(os.environ["TCC_LIBRARY_DIR"]))
    return dirs


def _open(name: str) -> C.CDLL:
    tried = []
    for d in _library_dirs():
        path = d / name
        if path.exists():
            return C.CDLL(str(path))
        tried.append(str(path))
    raise TccError(f"{name} not found (looked for {', '.join(tried)}): install the package with "
                   "pip install ./python after bash scripts/build.sh, or set TCC_LIBRARY_DIR to "
                   "a build's lib/ folder")


def _declare(lib: C.CDLL, table: dict) -> None:
    for name, (restype, argtypes) in table.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = restype, argtypes


_P = C.c_void_p
_RUNTIME = {
    "tccrt_last_error": (C.c_char_p, []),
    "tccrt_version": (C.c_char_p, []),
    "tccrt_device_available": (C.c_int, [C.c_int, C.POINTER(C.c_char_p)]),
    "tccrt_load_file": (C.c_int, [C.c_char_p, C.POINTER(Options), C.POINTER(_P)]),
    "tccrt_load_buffer": (C.c_int, [C.c_void_p, C.c_size_t, C.POINTER(Options), C.POINTER(_P)]),
    "tccrt_program_free": (None, [_P]),
    "tccrt_program_device": (C.c_int, [_P]),
    "tccrt_program_device_name": (C.c_char_p, [_P]),
    "tccrt_num_inputs": (C.c_size_t, [_P]),
    "tccrt_num_outputs": (C.c_size_t, [_P]),
    "tccrt_input_info": (C.c_int, [_P, C.c_size_t, C.POINTER(TensorInfo)]),
    "tccrt_output_info": (C.c_int, [_P, C.c_size_t, C.POINTER(TensorInfo)]),
    "tccrt_set_num_threads": (C.c_int, [_P, C.c_int]),
    "tccrt_set_input_shapes": (C.c_int, [_P, C.POINTER(C.POINTER(C.c_int64)),
                                         C.POINTER(C.c_size_t)]),
    "tccrt_input_dim_expr": (C.c_char_p, [_P, C.c_size_t, C.c_size_t]),
    "tccrt_num_symbols": (C.c_size_t, [_P]),
    "tccrt_arena_bytes": (C.c_size_t, [_P]),
    "tccrt_symbol_info": (C.c_int, [_P, C.c_size_t, C.POINTER(C.c_char_p),
                                    C.POINTER(C.c_int64), C.POINTER(C.c_int64)]),
    "tccrt_run": (C.c_int, [_P, C.POINTER(C.c_void_p), C.POINTER(C.c_void_p)]),
    "tccrt_run_device": (C.c_int, [_P, C.POINTER(C.c_void_p), C.POINTER(C.c_void_p)]),
    "tccrt_program_cuda_stream": (C.c_void_p, [_P]),
    "tccrt_set_profiling": (C.c_int, [_P, C.c_int]),
    "tccrt_num_launches": (C.c_size_t, [_P]),
    "tccrt_get_launch_profile": (C.c_int, [_P, C.c_size_t, C.POINTER(LaunchProfile)]),
    "tccrt_is_training": (C.c_int, [_P]),
    "tccrt_training_config": (C.c_char_p, [_P]),
    "tccrt_trainer_create": (C.c_int, [_P, C.c_uint64, C.POINTER(_P)]),
    "tccrt_trainer_free": (None, [_P]),
    "tccrt_trainer_num_batch_tensors": (C.c_size_t, [_P]),
    "tccrt_trainer_batch_info": (C.c_int, [_P, C.c_size_t, C.POINTER(TensorInfo)]),
    "tccrt_trainer_step": (C.c_int, [_P, C.POINTER(C.c_void_p), C.c_float,
                                     C.POINTER(C.c_float)]),
    "tccrt_trainer_grad_accumulation": (C.c_int, [_P]),
    "tccrt_trainer_micro_steps": (C.c_uint64, [_P]),
    "tccrt_trainer_steps": (C.c_uint64, [_P]),
    "tccrt_trainer_seed": (C.c_uint64, [_P]),
    "tccrt_trainer_rank": (C.c_int, [_P]),
    "tccrt_trainer_world_size": (C.c_int, [_P]),
    "tccrt_trainer_data_parallel": (C.c_int, [_P]),
    "tccrt_trainer_data_position": (C.c_int, [_P]),
    "tccrt_trainer_num_eval_outputs": (C.c_size_t, [_P]),
    "tccrt_trainer_eval_info": (C.c_int, [_P, C.c_size_t, C.POINTER(TensorInfo)]),
    "tccrt_trainer_eval": (C.c_int, [_P, C.POINTER(C.c_void_p), C.POINTER(C.c_void_p)]),
    "tccrt_trainer_num_state": (C.c_size_t, [_P]),
    "tccrt_trainer_state_info": (C.c_int, [_P, C.c_size_t, C.POINTER(TensorInfo),
                                           C.POINTER(C.c_int)]),
    "tccrt_trainer_get_state": (C.c_int, [_P, C.c_size_t, C.c_void_p]),
    "tccrt_trainer_set_state": (C.c_int, [_P, C.c_size_t, C.c_void_p]),
    "tccrt_trainer_save": (C.c_int, [_P, C.c_char_p, C.c_void_p, C.c_size_t]),
    "tccrt_trainer_load": (C.c_int, [_P, C.c_char_p]),
    "tccrt_trainer_user_data": (None, [_P, C.POINTER(C.c_void_p), c_size_p]),
    "tccrt_device_allocator_stats": (C.c_int, [_P, C.POINTER(AllocatorStats)]),
    "tccrt_device_allocator_snapshot": (C.c_int, [_P, C.POINTER(C.c_char_p)]),
    "tccrt_allocator_get_stats": (None, [C.POINTER(AllocatorStats)]),
    "tccrt_allocator_empty_cache": (None, []),
}
_COMPILER = {
    "tcc_last_error": (C.c_char_p, []),
    "tcc_version": (C.c_char_p, []),
    "tcc_compile_file": (C.c_int, [C.c_char_p, C.POINTER(C.c_char_p), C.c_size_t,
                                   C.POINTER(_P)]),
    "tcc_compile_buffer": (C.c_int, [C.c_void_p, C.c_size_t, C.c_char_p,
                                     C.POINTER(C.c_char_p), C.c_size_t, C.POINTER(_P)]),
    "tcc_compiled_artifact": (C.c_void_p, [_P, c_size_p]),
    "tcc_compiled_report": (C.c_char_p, [_P]),
    "tcc_compiled_free": (None, [_P]),
    "tcc_train": (C.c_int, [C.c_char_p, C.c_char_p, C.POINTER(C.c_char_p), C.c_size_t]),
}

_runtime = None
_compiler = None


def runtime() -> C.CDLL:
    """libtccrt, loaded and declared on first use."""
    global _runtime
    if _runtime is None:
        lib = _open("libtccrt.so.0")
        _declare(lib, _RUNTIME)
        _runtime = lib
    return _runtime


def compiler() -> C.CDLL:
    """libtcc (which needs libtccrt, loaded first from the same place)."""
    global _compiler
    if _compiler is None:
        runtime()
        lib = _open("libtcc.so.0")
        _declare(lib, _COMPILER)
        _compiler = lib
    return _compiler


def check(status: int, what: str = "") -> None:
    """Raises TccError with libtccrt's message when a tccrt_* call failed."""
    if status != 0:
        message = runtime().tccrt_last_error().decode(errors="replace")
        raise TccError(f"{what}: {message}" if what else message)


def check_compiler(status: int) -> None:
    if status != 0:
        raise TccError(compiler().tcc_last_error().decode(errors="replace"))


def pointers(values) -> C.Array:
    """A void*[] of the given addresses (ints)."""
    return (C.c_void_p * max(len(values), 1))(*values)
