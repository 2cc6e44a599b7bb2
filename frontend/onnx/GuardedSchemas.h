//===- GuardedSchemas.h - ONNX shape inference that cannot crash on bad input -===//
//
// ONNX 1.12's shape-inference functions trust what they read: the convolution and pooling one
// indexes the weight's dims by the input's rank and divides by strides, STFT's reads three dims
// of its signal, LayerNormalization's indexes by its axis (the importer's fuzzer crashed each:
// a ConvInteger whose weight has one more dim than its input, an STFT of a rank-1 signal, a
// LayerNormalization of a scalar). The registry
// here hands ONNX's InferShapes the same schemas, each of the operators known to need it with a
// guard run before its inference function: the guard checks what that function assumes of
// ranks and attributes and fails the node's inference (an onnx::InferenceError, a node-level
// error) instead. The importer then reports the node with its own message.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <onnx/defs/schema.h>

namespace tcc {

/// The guarded registry (a process-wide singleton over onnx::OpSchemaRegistry).
const onnx::ISchemaRegistry *guardedSchemaRegistry();

} // namespace tcc
