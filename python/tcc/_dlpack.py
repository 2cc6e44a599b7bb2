"""Reading DLPack capsules (the __dlpack__ protocol) with ctypes: what tcc needs to hand a
producer's device memory to libtccrt without copying it through the host. Host tensors go
through numpy.from_dlpack instead."""
from __future__ import annotations

import ctypes as C
from dataclasses import dataclass
from typing import Any

KDL_CPU, KDL_CUDA = 1, 2

# (DLDataTypeCode, bits) -> the tccrt_dtype names of _capi.DTYPE_NAMES. Code 6 is kDLBool
# (DLPack 0.8); older producers export bool as uint8.
_DTYPES = {(2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (4, 16): "bfloat16",
           (0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
           (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
           (6, 8): "bool"}


class _Device(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class _DataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class _Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", _Device), ("ndim", C.c_int32),
                ("dtype", _DataType), ("shape", C.POINTER(C.c_int64)),
                ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class _Managed(C.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", C.c_void_p), ("deleter", C.c_void_p)]


_get_pointer = C.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = C.c_void_p
_get_pointer.argtypes = [C.py_object, C.c_char_p]


def device_of(value: Any) -> tuple[int, int]:
    """(DLPack device type, id) of a tensor that speaks DLPack; (KDL_CPU, 0) otherwise."""
    if hasattr(value, "__dlpack_device__"):
        kind, index = value.__dlpack_device__()
        return int(kind), int(index)
    return KDL_CPU, 0


@dataclass
class DeviceTensor:
    """A borrowed view of a producer's tensor: its address, dtype and shape. The capsule is
    kept alive (its destructor returns the tensor to the producer) as long as this object."""
    address: int
    dtype_name: str
    shape: tuple
    device: tuple
    capsule: Any


def borrow(value: Any, stream: int | None) -> DeviceTensor:
    """The DLPack view of `value`, its work ordered before `stream` (the consumer's CUDA stream,
    as the protocol asks producers to arrange). Raises ValueError for a strided tensor or an
    element type tcc has no name for."""
    capsule = value.__dlpack__(stream=stream)
    managed = _Managed.from_address(_get_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    key = (t.dtype.code, t.dtype.bits)
    if key not in _DTYPES or t.dtype.lanes != 1:
        raise ValueError(f"DLPack element type (code {t.dtype.code}, {t.dtype.bits} bits, "
                         f"{t.dtype.lanes} lanes) has no tcc equivalent")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        expected = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != expected:
                raise ValueError(f"the tensor of shape {shape} is strided (strides "
                                 f"{tuple(t.strides[k] for k in range(t.ndim))}): make it "
                                 "contiguous first")
            expected *= shape[i]
    return DeviceTensor((t.data or 0) + t.byte_offset, _DTYPES[key], shape,
                        (t.device.device_type, t.device.device_id), capsule)
