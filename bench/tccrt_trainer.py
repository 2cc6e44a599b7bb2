"""libtccrt's trainer C API (tccrt.h: tccrt_load_file, tccrt_trainer_*) from Python, through
ctypes: what the benchmarks need to time training steps of a compiled training artifact without
the tcc command line (the GPU machine has libtccrt but no compiler). Needs numpy.

    t = Trainer("train.tcc", threads=1)        # libtccrt.so.0 found on LD_LIBRARY_PATH
    batch = t.local_batch(images, labels)      # this rank's block of a global batch
    loss = t.step(batch, learning_rate=1e-3)
"""
from __future__ import annotations

import ctypes as C

DTYPES = {11: "float32", 4: "int64", 3: "int32"}  # tccrt_dtype -> numpy dtype name


class _Options(C.Structure):
    _fields_ = [("num_threads", C.c_int), ("cuda_graph", C.c_int), ("device_ordinal", C.c_int)]


class _Info(C.Structure):
    _fields_ = [("name", C.c_char_p), ("dtype", C.c_int), ("rank", C.c_int64),
                ("shape", C.POINTER(C.c_int64)), ("bytes", C.c_size_t)]


class Trainer:
    """A loaded training artifact and its trainer (seed 0). Distributed artifacts run under
    mpirun: each process is the rank libtccrt's communicator gives it."""

    def __init__(self, artifact: str, threads: int = 0, library: str = "libtccrt.so.0"):
        lib = self.lib = C.CDLL(library)
        lib.tccrt_last_error.restype = C.c_char_p
        lib.tccrt_program_device_name.restype = C.c_char_p
        lib.tccrt_program_device_name.argtypes = [C.c_void_p]
        for name in ("num_batch_tensors", "num_state"):
            getattr(lib, "tccrt_trainer_" + name).restype = C.c_size_t
            getattr(lib, "tccrt_trainer_" + name).argtypes = [C.c_void_p]
        for name in ("rank", "world_size", "data_parallel", "data_position"):
            getattr(lib, "tccrt_trainer_" + name).argtypes = [C.c_void_p]
        lib.tccrt_trainer_state_info.argtypes = [C.c_void_p, C.c_size_t, C.c_void_p, C.c_void_p]
        lib.tccrt_trainer_get_state.argtypes = [C.c_void_p, C.c_size_t, C.c_void_p]
        self.program, self.trainer = C.c_void_p(), C.c_void_p()
        self._check(lib.tccrt_load_file(artifact.encode(), C.byref(_Options(threads, 0, 0)),
                                        C.byref(self.program)), f"load {artifact}")
        self._check(lib.tccrt_trainer_create(self.program, C.c_uint64(0), C.byref(self.trainer)),
                    "tccrt_trainer_create")
        self.batch_specs = []  # (numpy dtype name, shape) of each batch tensor on this rank
        for i in range(lib.tccrt_trainer_num_batch_tensors(self.trainer)):
            info = _Info()
            self._check(lib.tccrt_trainer_batch_info(self.trainer, C.c_size_t(i), C.byref(info)), "batch info")
            self.batch_specs.append((DTYPES[info.dtype], tuple(info.shape[k] for k in range(info.rank))))
        self.rank = lib.tccrt_trainer_rank(self.trainer)
        self.world_size = lib.tccrt_trainer_world_size(self.trainer)
        self.data_parallel = lib.tccrt_trainer_data_parallel(self.trainer)
        self.data_position = lib.tccrt_trainer_data_position(self.trainer)
        self.device_name = lib.tccrt_program_device_name(self.program).decode()

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.tccrt_last_error().decode()}")

    def local_batch(self, *tensors):
        """This rank's block (its data-parallel position) of each global batch tensor, converted
        to the artifact's dtypes and shapes; returns what step() takes (keep it alive)."""
        import numpy as np
        arrays = []
        for t, (dtype, shape) in zip(tensors, self.batch_specs):
            rows = len(t) // self.data_parallel
            block = t[self.data_position * rows:(self.data_position + 1) * rows]
            arrays.append(np.ascontiguousarray(block.reshape(shape), dtype))
        return arrays, (C.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])

    def step(self, batch, learning_rate: float) -> float:
        """One micro-batch (and the update when it ends a step); the global batch's mean loss."""
        loss = C.c_float()
        self._check(self.lib.tccrt_trainer_step(self.trainer, batch[1], C.c_float(learning_rate),
                                                C.byref(loss)), "tccrt_trainer_step")
        return loss.value

    def float_state(self):
        """Every float32 state tensor this rank holds, concatenated (to compare runs)."""
        import numpy as np
        parts = []
        for i in range(self.lib.tccrt_trainer_num_state(self.trainer)):
            info, kind = _Info(), C.c_int()
            self._check(self.lib.tccrt_trainer_state_info(self.trainer, C.c_size_t(i), C.byref(info),
                                                          C.byref(kind)), "state info")
            if info.dtype != 11:
                continue
            a = np.empty(info.bytes // 4, np.float32)
            self._check(self.lib.tccrt_trainer_get_state(self.trainer, C.c_size_t(i),
                                                         a.ctypes.data_as(C.c_void_p)), "get state")
            parts.append(a)
        return np.concatenate(parts)
