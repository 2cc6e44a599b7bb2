//===- SymbolBinding.h - Size symbols bound from a run's input shapes -----===//
//
// A program with symbolic dims declares size symbols with inclusive ranges. A run binds each
// symbol from the input shapes: from an input dim that is the symbol itself, else from a dim
// a*s + b that reads it alone; then every input dim must evaluate to the given size. Errors
// name the input, the dim and the assumption. Standard C++ only: the compiler (its interpreter,
// its planner's bounds) and libtccrt (symbolic artifacts) bind and bound sizes with this one
// implementation, so that they agree.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/SymExpr.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tcc {

/// A size symbol's inclusive range.
struct SymbolRange {
  int64_t min = 0;
  int64_t max = INT64_MAX;
};
using SymbolRanges = std::map<std::string, SymbolRange>;

/// Symbol values of one run.
using SymbolBindings = std::map<std::string, int64_t>;

/// "seq in 16..512", "seq >= 16" (no upper bound), "seq = 8".
std::string describeRange(const std::string &name, const SymbolRange &range);
/// Every range, comma-separated.
std::string describeSymbolRanges(const SymbolRanges &ranges);

/// The range of `e` over the symbols' ranges (interval arithmetic, SymExpr::bounds; a symbol
/// without a range ranges over 0 and up). The compiler plans a symbolic buffer's bytes at this
/// range's max, and libtccrt checks an artifact's plan with it.
SymbolRange rangeOf(const SymExpr &e, const SymbolRanges &ranges);

/// Binds the symbols of the inputs' dims (`dims[i]`, one expression per dim of input i, static
/// dims as constants) to the sizes of `shapes`, checking each symbol against its range in
/// `ranges` and every dim against the sizes given. Throws tcc::Error naming the input
/// (`inputNames[i]`, or "input i"), the dim and the assumption. A symbol no input dim
/// determines (alone, as a*s + b) is left unbound; a dim that reads it is then an error.
SymbolBindings bindSymbols(const std::vector<std::vector<SymExpr>> &dims,
                           const std::vector<std::vector<int64_t>> &shapes,
                           const SymbolRanges &ranges,
                           const std::vector<std::string> &inputNames = {});

/// The value of `e` under `bindings`; tcc::Error naming the expression when a symbol is
/// unbound or the arithmetic overflows or divides by zero.
int64_t evaluateSym(const SymExpr &e, const SymbolBindings &bindings);

} // namespace tcc
