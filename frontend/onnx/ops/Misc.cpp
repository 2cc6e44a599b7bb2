//===- Misc.cpp - ONNX lowerings (see NodeContext.h) -------------------------===//
#include "../NodeContext.h"

namespace tcc::onnx_import {

void registerMiscOps(OpRegistry &r) {}

} // namespace tcc::onnx_import
