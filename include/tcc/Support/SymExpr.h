//===- SymExpr.h - Symbolic integer expressions for tensor dimensions -----===//
//
// A symbolic int64 expression, as a symbolic tensor dimension is written ("batch*seq*768",
// "floordiv(seq + 1, 2)"): a polynomial with int64 coefficients over symbols and opaque terms
// (floordiv, ceildiv, mod, max, min of two expressions), kept in one canonical form so that
// equal polynomials compare equal structurally. Construction simplifies (constant folding,
// exact division, max/min of expressions a constant apart); evaluation and interval bounds are
// overflow-checked, since their inputs are untrusted. Plain C++ (the runtime embeds it).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tcc {

/// A symbolic integer expression in canonical form: a sum of terms, each a nonzero int64
/// coefficient times a monomial (a product of atoms raised to positive powers), where an atom
/// is a symbol or an opaque floordiv/ceildiv/mod/max/min node of two canonical expressions.
/// Terms are sorted (higher degree first) and like terms merged, so `==` is structural.
///
/// Constructors and operators throw std::overflow_error when a constant coefficient (or a
/// power) leaves the int64 range, and std::length_error when a product would have more than
/// 10000 terms. Simplifications assume that a divisor which is not a constant is nonzero
/// (floordiv(n*k, n) is k), as TVM's and SymPy's do.
class SymExpr {
public:
  /// The constant 0.
  SymExpr();
  /// The constant `value` (implicit, so `2 * seq` and `seq + 1` read as they should).
  SymExpr(int64_t value);
  /// The symbol `name`, which must be an identifier [A-Za-z_][A-Za-z0-9_]*; throws
  /// std::invalid_argument otherwise.
  static SymExpr symbol(std::string_view name);
  /// Parses the text form that str() prints: decimal int64 literals, identifiers, binary and
  /// unary + and -, *, ^ with a decimal exponent ("seq^2"), parentheses and the functions
  /// floordiv, ceildiv, mod, max and min of two arguments; whitespace anywhere between tokens.
  /// Returns std::nullopt and sets `*error` (when given) to what is wrong and where (a byte
  /// offset) on bad text, and on text whose value overflows as the operators would throw.
  static std::optional<SymExpr> parse(std::string_view text, std::string *error = nullptr);

  /// The canonical text, with parse(e.str()) == e: "batch*seq*768", "2*seq + 1",
  /// "floordiv(seq + 1, 2)", "max(seq, 4)", "-3", "seq^2". A lone product prints its
  /// coefficient last (as a shape's dims multiply: "batch*seq*768"), a term of a sum first.
  std::string str() const;
  /// The value when the expression is a constant.
  std::optional<int64_t> constant() const;
  /// Whether the expression is a constant (reads no symbol).
  bool isConstant() const;
  /// The symbol's name when the expression is exactly one symbol.
  std::optional<std::string> symbolName() const;

  /// The sum of `a` and `b`.
  friend SymExpr operator+(const SymExpr &a, const SymExpr &b);
  /// The difference of `a` and `b`.
  friend SymExpr operator-(const SymExpr &a, const SymExpr &b);
  /// The product of `a` and `b`, expanded.
  friend SymExpr operator*(const SymExpr &a, const SymExpr &b);
  /// The negation of `a`.
  friend SymExpr operator-(const SymExpr &a);
  /// Adds `b` to this expression.
  SymExpr &operator+=(const SymExpr &b);
  /// Subtracts `b` from this expression.
  SymExpr &operator-=(const SymExpr &b);
  /// Multiplies this expression by `b`.
  SymExpr &operator*=(const SymExpr &b);

  /// floor(a / b). Constants fold (a constant zero divisor stays, for evaluate() to report);
  /// an exact quotient (divideExactly) replaces the node.
  static SymExpr floorDiv(const SymExpr &a, const SymExpr &b);
  /// ceil(a / b), simplified as floorDiv is.
  static SymExpr ceilDiv(const SymExpr &a, const SymExpr &b);
  /// a - b * floor(a / b): the floor modulo, with the sign of the divisor (Python's %). It is 0
  /// where b divides a exactly.
  static SymExpr mod(const SymExpr &a, const SymExpr &b);
  /// The larger of `a` and `b`: the one when they are equal or a constant apart, folded for
  /// constants, else an opaque node (max(a, b) == max(b, a)).
  static SymExpr max(const SymExpr &a, const SymExpr &b);
  /// The smaller of `a` and `b`, simplified as max is.
  static SymExpr min(const SymExpr &a, const SymExpr &b);
  /// The polynomial q with a == q * b, when there is one with integer coefficients (b a
  /// constant, a monomial or a polynomial: exact multivariate division); std::nullopt
  /// otherwise, and when b is 0.
  static std::optional<SymExpr> divideExactly(const SymExpr &a, const SymExpr &b);

  /// Structural equality of the canonical forms (so equality of the polynomials).
  bool operator==(const SymExpr &other) const;
  /// Structural inequality.
  bool operator!=(const SymExpr &other) const { return !(*this == other); }
  /// A total order consistent with ==, for std::map keys (not a numeric comparison).
  bool operator<(const SymExpr &other) const;
  /// A hash consistent with ==.
  size_t hash() const;

  /// The names of the symbols the expression reads, sorted and unique (those inside floordiv,
  /// max, ... terms included).
  std::vector<std::string> symbols() const;
  /// The expression with each symbol in `replacements` replaced by its expression (the others
  /// stay), simplified again. Throws std::overflow_error as the operators do.
  SymExpr substitute(const std::map<std::string, SymExpr> &replacements) const;
  /// The value when each symbol has the value `valueOf` gives it. Returns std::nullopt and sets
  /// `*error` (when given) on an unbound symbol (`valueOf` returns nullopt; the message names
  /// it), a division or modulo by zero, or an int64 overflow (every step is checked).
  std::optional<int64_t>
  evaluate(const std::function<std::optional<int64_t>(const std::string &)> &valueOf,
           std::string *error = nullptr) const;
  /// Inclusive bounds [lo, hi] of the value, when each symbol lies in the inclusive range
  /// `rangeOf` gives (a symbol it knows nothing of, nullopt, in [0, INT64_MAX]), by interval
  /// arithmetic that saturates at INT64_MIN and INT64_MAX. They hold for every binding in the
  /// ranges at which evaluate() succeeds; a range of a divisor that contains 0 skips the 0.
  std::pair<int64_t, int64_t>
  bounds(const std::function<std::optional<std::pair<int64_t, int64_t>>(const std::string &)>
             &rangeOf) const;

  /// What an atom is.
  enum class AtomKind : uint8_t { Symbol, FloorDiv, CeilDiv, Mod, Max, Min };
  /// The canonical form, for rebuilding the expression in another algebra (code generators:
  /// C++ text, MLIR affine expressions): the value is the sum over terms of
  /// coeff * prod(atom^power), an atom being a symbol (`name`) or `kind`(lhs, rhs).
  struct AtomView {
    AtomKind kind;
    std::string name;
    std::vector<SymExpr> operands; // lhs, rhs (empty for a symbol)
  };
  struct TermView {
    int64_t coeff;
    std::vector<std::pair<AtomView, int64_t>> factors; // (atom, power >= 1)
  };
  /// The terms (none for 0; a constant is one term without factors).
  std::vector<TermView> terms() const;

private:
  /// The operands of an opaque atom (defined in SymExpr.cpp).
  struct OpNode;
  /// A symbol (`name`) or an opaque node (`op`).
  struct Atom {
    AtomKind kind = AtomKind::Symbol;
    std::string name;
    std::shared_ptr<const OpNode> op;
  };
  /// An atom raised to a positive power.
  struct Factor {
    Atom atom;
    int64_t power = 1;
  };
  /// A nonzero coefficient times the product of factors (sorted by atom, atoms distinct).
  struct Term {
    int64_t coeff = 0;
    std::vector<Factor> factors;
  };
  /// The operations on the representation (defined in SymExpr.cpp).
  struct Impl;

  /// The terms, in canonical order; none for 0.
  std::vector<Term> terms_;

  friend std::string shapeString(const std::vector<SymExpr> &dims);
};

/// The product of `dims` (1 for none). Not named `product`: one in namespace tcc would hide the
/// local `product(ArrayRef<int64_t>)` helpers of files that define functions in tcc.
SymExpr productOf(const std::vector<SymExpr> &dims);
/// The dims joined with 'x' ("batchx128x768"); a dim that is not a single term is wrapped in
/// parentheses ("(seq + 1)x4").
std::string shapeString(const std::vector<SymExpr> &dims);

} // namespace tcc

namespace std {
/// Hashes a tcc::SymExpr by its canonical form.
template <> struct hash<tcc::SymExpr> {
  size_t operator()(const tcc::SymExpr &e) const { return e.hash(); }
};
} // namespace std
