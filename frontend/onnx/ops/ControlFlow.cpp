//===- ControlFlow.cpp - ONNX lowerings (see NodeContext.h) -------------------------===//
#include "../NodeContext.h"

namespace tcc::onnx_import {

void registerControlFlowOps(OpRegistry &r) {}

} // namespace tcc::onnx_import
