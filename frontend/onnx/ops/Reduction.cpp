//===- Reduction.cpp - ONNX lowerings (see NodeContext.h) -------------------------===//
#include "../NodeContext.h"

namespace tcc::onnx_import {

void registerReductionOps(OpRegistry &r) {}

} // namespace tcc::onnx_import
