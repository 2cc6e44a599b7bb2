//===- SymbolBinding.cpp - Size symbols bound from a run's input shapes ---===//
#include "tcc/Support/SymbolBinding.h"

#include "tcc/Support/Tensor.h"

namespace tcc {

std::string describeRange(const std::string &name, const SymbolRange &range) {
  if (range.max == INT64_MAX)
    return name + " >= " + std::to_string(range.min);
  if (range.min == range.max)
    return name + " = " + std::to_string(range.min);
  return name + " in " + std::to_string(range.min) + ".." + std::to_string(range.max);
}

std::string describeSymbolRanges(const SymbolRanges &ranges) {
  std::string s;
  for (const auto &[name, range] : ranges)
    s += (s.empty() ? "" : ", ") + describeRange(name, range);
  return s;
}

SymbolRange rangeOf(const SymExpr &e, const SymbolRanges &ranges) {
  auto [lo, hi] = e.bounds([&](const std::string &s) -> std::optional<std::pair<int64_t, int64_t>> {
    auto it = ranges.find(s);
    if (it == ranges.end())
      return std::nullopt;
    return std::pair{it->second.min, it->second.max};
  });
  return {lo, hi};
}

int64_t evaluateSym(const SymExpr &e, const SymbolBindings &bindings) {
  std::string error;
  std::optional<int64_t> v = e.evaluate(
      [&](const std::string &s) -> std::optional<int64_t> {
        auto it = bindings.find(s);
        return it == bindings.end() ? std::nullopt : std::optional<int64_t>(it->second);
      },
      &error);
  if (!v)
    throw Error(e.str() + ": " + error);
  return *v;
}

namespace {

/// One binding: the inputs' declared dims against the sizes given, with the words errors use.
class Binder {
public:
  Binder(const std::vector<std::vector<SymExpr>> &dims,
         const std::vector<std::vector<int64_t>> &shapes, const SymbolRanges &ranges,
         const std::vector<std::string> &names)
      : dims_(dims), shapes_(shapes), ranges_(ranges), names_(names) {}

  SymbolBindings bind() {
    checkRanks();
    // Plain symbols first: a dim `seq` binds seq before `2*seq` is solved for it.
    for (bool plainOnly : {true, false})
      forEachDim([&](size_t i, size_t d) { solve(i, d, plainOnly); });
    forEachDim([&](size_t i, size_t d) { check(i, d); });
    return bindings_;
  }

private:
  std::string input(size_t i) const {
    return i < names_.size() ? "input '" + names_[i] + "'" : "input " + std::to_string(i);
  }
  std::string where(size_t i, size_t d) const { return input(i) + " dim " + std::to_string(d); }

  template <class F> void forEachDim(F f) const {
    for (size_t i = 0; i < dims_.size(); ++i)
      for (size_t d = 0; d < dims_[i].size(); ++d)
        f(i, d);
  }

  void checkRanks() const {
    if (dims_.size() != shapes_.size())
      throw Error("the program takes " + std::to_string(dims_.size()) + " inputs, " +
                  std::to_string(shapes_.size()) + " were given");
    for (size_t i = 0; i < dims_.size(); ++i)
      if (dims_[i].size() != shapes_[i].size())
        throw Error(input(i) + " has rank " + std::to_string(shapes_[i].size()) +
                    ", the program expects rank " + std::to_string(dims_[i].size()) + " (" +
                    shapeString(dims_[i]) + ")");
  }

  /// Binds the symbol s of dim d of input i when the dim is a*s + b, s is still unbound (and,
  /// when plainOnly, the dim is s itself): s = (size - b) / a, which must be an integer in s's
  /// range.
  void solve(size_t i, size_t d, bool plainOnly) {
    const SymExpr &dim = dims_[i][d];
    std::vector<std::string> names = dim.symbols();
    if (names.size() != 1 || bindings_.count(names[0]) || (plainOnly && !dim.symbolName()))
      return;
    const std::string &name = names[0];
    SymExpr b = dim.substitute({{name, SymExpr(0)}});
    std::optional<SymExpr> a = SymExpr::divideExactly(dim - b, SymExpr::symbol(name));
    if (!a || !a->constant() || !b.constant() || *a->constant() == 0)
      return; // not affine: check() finds the symbol unbound
    int64_t size = shapes_[i][d], num, den = *a->constant();
    // (Sizes are untrusted: size - b may overflow, and INT64_MIN / -1 does.)
    if (__builtin_sub_overflow(size, *b.constant(), &num) || (den == -1 && num == INT64_MIN) ||
        num % den != 0)
      throw Error(where(i, d) + " is " + std::to_string(size) + ", but the program expects " +
                  dim.str() + " for an integer " + name);
    auto range = ranges_.find(name);
    SymbolRange r = range == ranges_.end() ? SymbolRange{} : range->second;
    int64_t value = num / den;
    if (value < r.min || value > r.max)
      throw Error(where(i, d) + " is " + std::to_string(size) +
                  (dim.symbolName() ? "" : ", so " + name + " = " + std::to_string(value)) +
                  ", outside the compiled assumption " + describeRange(name, r));
    bindings_[name] = value;
    boundBy_[name] = where(i, d);
  }

  /// Dim d of input i evaluates to the size given.
  void check(size_t i, size_t d) {
    const SymExpr &dim = dims_[i][d];
    int64_t want;
    try {
      want = evaluateSym(dim, bindings_);
    } catch (const Error &e) {
      throw Error(where(i, d) + ": " + e.what());
    }
    if (want == shapes_[i][d])
      return;
    std::string why = dim.isConstant()
                          ? "the program fixes it to " + std::to_string(want)
                          : "the program expects " + dim.str() + " = " + std::to_string(want);
    if (std::optional<std::string> name = dim.symbolName())
      why += " (set by " + boundBy_[*name] + ")";
    throw Error(where(i, d) + " is " + std::to_string(shapes_[i][d]) + ", but " + why);
  }

  const std::vector<std::vector<SymExpr>> &dims_;
  const std::vector<std::vector<int64_t>> &shapes_;
  const SymbolRanges &ranges_;
  const std::vector<std::string> &names_;
  SymbolBindings bindings_;
  std::map<std::string, std::string> boundBy_; // symbol -> "input 'x' dim 1"
};

} // namespace

SymbolBindings bindSymbols(const std::vector<std::vector<SymExpr>> &dims,
                           const std::vector<std::vector<int64_t>> &shapes,
                           const SymbolRanges &ranges,
                           const std::vector<std::string> &inputNames) {
  return Binder(dims, shapes, ranges, inputNames).bind();
}

} // namespace tcc
