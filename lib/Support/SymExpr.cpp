//===- SymExpr.cpp - Symbolic integer expressions for tensor dimensions ---===//
//
// The canonical form, its arithmetic and simplifications, the text form (printer and
// recursive-descent parser), evaluation with checked int64 arithmetic and interval bounds with
// saturating arithmetic.
//
//===----------------------------------------------------------------------===//

#include "tcc/Support/SymExpr.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

namespace tcc {

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
/// The most terms a product may have, and the most term pairs it may multiply: symbolic dims
/// are small, and a product of sums of untrusted text must not take all memory.
constexpr size_t kMaxTerms = 10000;
constexpr size_t kMaxTermPairs = 1000000;
/// The most nesting levels the parser follows.
constexpr int kMaxParseDepth = 200;
/// The most steps of polynomial division divideExactly tries.
constexpr int kMaxDivisionSteps = 10000;

[[noreturn]] void overflow(const std::string &what) {
  throw std::overflow_error("int64 overflow in a symbolic expression: " + what);
}

int64_t addOrThrow(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    overflow(std::to_string(a) + " + " + std::to_string(b));
  return r;
}

int64_t subOrThrow(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r))
    overflow(std::to_string(a) + " - " + std::to_string(b));
  return r;
}

/// floor(a / b) for b != 0; false on overflow (kMin / -1).
bool floorDivChecked(int64_t a, int64_t b, int64_t &q) {
  if (a == kMin && b == -1)
    return false;
  q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0)))
    --q;
  return true;
}

/// ceil(a / b) for b != 0; false on overflow (kMin / -1).
bool ceilDivChecked(int64_t a, int64_t b, int64_t &q) {
  if (a == kMin && b == -1)
    return false;
  q = a / b;
  if (a % b != 0 && ((a < 0) == (b < 0)))
    ++q;
  return true;
}

/// a - b * floor(a / b) for b != 0 (never overflows).
int64_t floorMod(int64_t a, int64_t b) {
  if (b == -1)
    return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

/// x^p for p >= 1; false on overflow. Only squares it needs: when |x| >= 2 a square overflows
/// only if x^p does.
bool powChecked(int64_t x, int64_t p, int64_t &out) {
  int64_t result = 1, base = x;
  while (p) {
    if ((p & 1) && __builtin_mul_overflow(result, base, &result))
      return false;
    p >>= 1;
    if (p && __builtin_mul_overflow(base, base, &base))
      return false;
  }
  out = result;
  return true;
}

int64_t satMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return (a < 0) != (b < 0) ? kMin : kMax;
  return r;
}

int64_t clamp128(__int128 v) {
  return v > kMax ? kMax : v < kMin ? kMin : (int64_t)v;
}

/// |x|^p for p >= 1, saturating at 2^63.
uint64_t satPowMagnitude(uint64_t m, int64_t p) {
  const uint64_t cap = uint64_t(1) << 63;
  auto mul = [&](uint64_t a, uint64_t b) -> uint64_t {
    if (a == 0 || b == 0)
      return 0;
    if (a > cap / b)
      return cap;
    return std::min(a * b, cap);
  };
  uint64_t result = 1, base = std::min(m, cap);
  while (p) {
    if (p & 1)
      result = mul(result, base);
    p >>= 1;
    if (p)
      base = mul(base, base);
  }
  return result;
}

/// x^p for p >= 1, saturating at kMin and kMax (monotone in x on each sign).
int64_t satPow(int64_t x, int64_t p) {
  uint64_t m = x < 0 ? uint64_t(0) - uint64_t(x) : uint64_t(x);
  uint64_t r = satPowMagnitude(m, p);
  if (x < 0 && (p & 1))
    return r >= (uint64_t(1) << 63) ? kMin : -(int64_t)r;
  return r > (uint64_t)kMax ? kMax : (int64_t)r;
}

bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }
bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool isIdentifier(std::string_view s) {
  if (s.empty() || !isIdentStart(s[0]))
    return false;
  return std::all_of(s.begin(), s.end(), isIdentChar);
}

/// An interval [lo, hi].
struct Interval {
  int64_t lo, hi;
};

Interval mulIntervals(Interval a, Interval b) {
  int64_t c[4] = {satMul(a.lo, b.lo), satMul(a.lo, b.hi), satMul(a.hi, b.lo),
                  satMul(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

Interval powInterval(Interval x, int64_t p) {
  if (p == 1)
    return x;
  bool even = p % 2 == 0;
  if (x.lo >= 0 || !even)
    return {satPow(x.lo, p), satPow(x.hi, p)};
  if (x.hi <= 0)
    return {satPow(x.hi, p), satPow(x.lo, p)};
  return {0, std::max(satPow(x.lo, p), satPow(x.hi, p))};
}

/// The nonzero parts of a divisor's interval: [lo, -1] and [1, hi] where they are not empty.
std::vector<Interval> nonzeroParts(Interval d) {
  std::vector<Interval> parts;
  if (d.lo <= -1)
    parts.push_back({d.lo, std::min<int64_t>(d.hi, -1)});
  if (d.hi >= 1)
    parts.push_back({std::max<int64_t>(d.lo, 1), d.hi});
  return parts;
}

/// The hull of floor(x / y) (or ceil) over x in a, y in b, b not containing 0: monotone in x
/// and in y on either sign of y, so the corners bound it. kMin / -1 saturates to kMax.
Interval divInterval(Interval a, Interval b, bool ceil) {
  auto div = [&](int64_t x, int64_t y) {
    int64_t q;
    if (!(ceil ? ceilDivChecked(x, y, q) : floorDivChecked(x, y, q)))
      return kMax;
    return q;
  };
  int64_t c[4] = {div(a.lo, b.lo), div(a.lo, b.hi), div(a.hi, b.lo), div(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

/// The bounds of floor mod(x, y) over x in a, y in b, b all positive or all negative.
Interval modInterval(Interval a, Interval b) {
  if (b.lo == b.hi) {
    int64_t qa, qb;
    if (floorDivChecked(a.lo, b.lo, qa) && floorDivChecked(a.hi, b.lo, qb) && qa == qb)
      return {floorMod(a.lo, b.lo), floorMod(a.hi, b.lo)};
  }
  if (b.lo >= 1) {
    if (a.lo >= 0 && a.hi < b.lo)
      return a;
    return {0, a.lo >= 0 ? std::min(a.hi, b.hi - 1) : b.hi - 1};
  }
  if (a.hi <= 0 && a.lo > b.hi)
    return a;
  return {a.hi <= 0 ? std::max(a.lo, b.lo + 1) : b.lo + 1, 0};
}

/// An error of evaluate(), thrown inside it.
struct EvalError {
  std::string message;
};

/// A parse error, thrown inside the parser.
struct ParseError {
  size_t offset;
  std::string message;
};

} // namespace

struct SymExpr::OpNode {
  SymExpr lhs, rhs;
};

struct SymExpr::Impl {
  /// For a constant divisor c (not 0 or -1): splits a = c*quotient + rest where rest keeps the
  /// terms whose coefficients c does not divide; false when either part would be empty. Then
  /// floordiv(a, c) = quotient + floordiv(rest, c), and likewise ceildiv and mod.
  static bool splitMultiples(const SymExpr &a, int64_t c, SymExpr &quotient, SymExpr &rest) {
    if (c == 0 || c == -1)
      return false;
    quotient.terms_.clear();
    rest.terms_.clear();
    for (const Term &t : a.terms_) {
      if (t.coeff % c == 0)
        quotient.terms_.push_back(Term{t.coeff / c, t.factors}); // sorted order kept
      else
        rest.terms_.push_back(t);
    }
    return !quotient.terms_.empty() && !rest.terms_.empty();
  }

  using Factors = std::vector<Factor>;
  using ValueOf = std::function<std::optional<int64_t>(const std::string &)>;
  using RangeOf = std::function<std::optional<std::pair<int64_t, int64_t>>(const std::string &)>;

  static SymExpr make(std::vector<Term> terms) {
    SymExpr e;
    e.terms_ = std::move(terms);
    return e;
  }

  static SymExpr opaque(AtomKind kind, const SymExpr &a, const SymExpr &b) {
    Atom atom;
    atom.kind = kind;
    atom.op = std::make_shared<const OpNode>(OpNode{a, b});
    Term t;
    t.coeff = 1;
    t.factors.push_back(Factor{std::move(atom), 1});
    return make({std::move(t)});
  }

  static const char *kindName(AtomKind kind) {
    switch (kind) {
    case AtomKind::Symbol: return "symbol";
    case AtomKind::FloorDiv: return "floordiv";
    case AtomKind::CeilDiv: return "ceildiv";
    case AtomKind::Mod: return "mod";
    case AtomKind::Max: return "max";
    case AtomKind::Min: return "min";
    }
    return "?";
  }

  // ---- Order ------------------------------------------------------------------------------

  static int compareAtoms(const Atom &a, const Atom &b) {
    if (a.kind != b.kind)
      return a.kind < b.kind ? -1 : 1;
    if (a.kind == AtomKind::Symbol) {
      int c = a.name.compare(b.name);
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.op == b.op)
      return 0;
    if (int c = compare(a.op->lhs, b.op->lhs))
      return c;
    return compare(a.op->rhs, b.op->rhs);
  }

  static unsigned __int128 degree(const Factors &f) {
    unsigned __int128 d = 0;
    for (const Factor &x : f)
      d += (uint64_t)x.power;
    return d;
  }

  /// Graded lexicographic order, greatest first: higher degree first, then by the exponents of
  /// the atoms in atom order. A monomial order (compatible with multiplication), which
  /// polynomial division needs.
  static int compareMonomials(const Factors &a, const Factors &b) {
    unsigned __int128 da = degree(a), db = degree(b);
    if (da != db)
      return da > db ? -1 : 1;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (int c = compareAtoms(a[i].atom, b[i].atom))
        return c;
      if (a[i].power != b[i].power)
        return a[i].power > b[i].power ? -1 : 1;
    }
    return a.size() == b.size() ? 0 : a.size() < b.size() ? -1 : 1;
  }

  static int compare(const SymExpr &a, const SymExpr &b) {
    for (size_t i = 0; i < a.terms_.size() && i < b.terms_.size(); ++i) {
      if (int c = compareMonomials(a.terms_[i].factors, b.terms_[i].factors))
        return c;
      if (a.terms_[i].coeff != b.terms_[i].coeff)
        return a.terms_[i].coeff < b.terms_[i].coeff ? -1 : 1;
    }
    if (a.terms_.size() != b.terms_.size())
      return a.terms_.size() < b.terms_.size() ? -1 : 1;
    return 0;
  }

  // ---- Arithmetic -------------------------------------------------------------------------

  static SymExpr combine(const SymExpr &a, const SymExpr &b, bool subtract) {
    std::vector<Term> out;
    out.reserve(a.terms_.size() + b.terms_.size());
    size_t i = 0, j = 0;
    auto pushB = [&](const Term &t) {
      Term n = t;
      if (subtract)
        n.coeff = subOrThrow(0, t.coeff);
      out.push_back(std::move(n));
    };
    while (i < a.terms_.size() && j < b.terms_.size()) {
      int c = compareMonomials(a.terms_[i].factors, b.terms_[j].factors);
      if (c < 0) {
        out.push_back(a.terms_[i++]);
      } else if (c > 0) {
        pushB(b.terms_[j++]);
      } else {
        int64_t coeff = subtract ? subOrThrow(a.terms_[i].coeff, b.terms_[j].coeff)
                                 : addOrThrow(a.terms_[i].coeff, b.terms_[j].coeff);
        if (coeff != 0) {
          out.push_back(a.terms_[i]);
          out.back().coeff = coeff;
        }
        ++i, ++j;
      }
    }
    for (; i < a.terms_.size(); ++i)
      out.push_back(a.terms_[i]);
    for (; j < b.terms_.size(); ++j)
      pushB(b.terms_[j]);
    return make(std::move(out));
  }

  static Factors mulMonomials(const Factors &a, const Factors &b) {
    Factors out;
    out.reserve(a.size() + b.size());
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      int c = compareAtoms(a[i].atom, b[j].atom);
      if (c < 0) {
        out.push_back(a[i++]);
      } else if (c > 0) {
        out.push_back(b[j++]);
      } else {
        int64_t p;
        if (__builtin_add_overflow(a[i].power, b[j].power, &p))
          overflow("the power " + std::to_string(a[i].power) + " + " +
                   std::to_string(b[j].power) + " of " + atomStr(a[i].atom));
        out.push_back(Factor{a[i].atom, p});
        ++i, ++j;
      }
    }
    out.insert(out.end(), a.begin() + i, a.end());
    out.insert(out.end(), b.begin() + j, b.end());
    return out;
  }

  /// a / b when monomial b divides monomial a (every atom of b in a, at least as often).
  static std::optional<Factors> divideMonomials(const Factors &a, const Factors &b) {
    Factors out;
    size_t i = 0;
    for (const Factor &f : b) {
      while (i < a.size() && compareAtoms(a[i].atom, f.atom) < 0)
        out.push_back(a[i++]);
      if (i == a.size() || compareAtoms(a[i].atom, f.atom) != 0 || a[i].power < f.power)
        return std::nullopt;
      if (a[i].power > f.power)
        out.push_back(Factor{a[i].atom, a[i].power - f.power});
      ++i;
    }
    out.insert(out.end(), a.begin() + i, a.end());
    return out;
  }

  static SymExpr multiply(const SymExpr &a, const SymExpr &b) {
    if (a.terms_.empty() || b.terms_.empty())
      return SymExpr();
    if ((unsigned __int128)a.terms_.size() * b.terms_.size() > kMaxTermPairs)
      throw std::length_error("symbolic product too large: " + std::to_string(a.terms_.size()) +
                              " by " + std::to_string(b.terms_.size()) + " terms");
    struct Partial {
      Factors factors;
      __int128 coeff;
    };
    std::vector<Partial> parts;
    parts.reserve(a.terms_.size() * b.terms_.size());
    for (const Term &x : a.terms_)
      for (const Term &y : b.terms_)
        parts.push_back({mulMonomials(x.factors, y.factors), (__int128)x.coeff * y.coeff});
    std::stable_sort(parts.begin(), parts.end(), [](const Partial &x, const Partial &y) {
      return compareMonomials(x.factors, y.factors) < 0;
    });
    std::vector<Term> out;
    for (size_t i = 0; i < parts.size();) {
      __int128 sum = parts[i].coeff;
      size_t j = i + 1;
      for (; j < parts.size() && compareMonomials(parts[i].factors, parts[j].factors) == 0; ++j)
        if (__builtin_add_overflow(sum, parts[j].coeff, &sum))
          overflow("a coefficient of (" + a.str() + ") * (" + b.str() + ")");
      if (sum < kMin || sum > kMax)
        overflow("a coefficient of (" + a.str() + ") * (" + b.str() + ")");
      if (sum != 0)
        out.push_back(Term{(int64_t)sum, std::move(parts[i].factors)});
      i = j;
    }
    if (out.size() > kMaxTerms)
      throw std::length_error("symbolic product too large: " + std::to_string(out.size()) +
                              " terms");
    return make(std::move(out));
  }

  /// base^p for p >= 0.
  static SymExpr power(SymExpr base, int64_t p) {
    SymExpr result(1);
    while (p) {
      if (p & 1)
        result = multiply(result, base);
      p >>= 1;
      if (p)
        base = multiply(base, base);
    }
    return result;
  }

  // ---- Text -------------------------------------------------------------------------------

  static std::string atomStr(const Atom &a) {
    if (a.kind == AtomKind::Symbol)
      return a.name;
    return std::string(kindName(a.kind)) + "(" + a.op->lhs.str() + ", " + a.op->rhs.str() + ")";
  }

  static std::string factorsStr(const Factors &factors) {
    std::string out;
    for (const Factor &f : factors) {
      if (!out.empty())
        out += '*';
      out += atomStr(f.atom);
      if (f.power != 1)
        out += '^' + std::to_string(f.power);
    }
    return out;
  }

  static std::string str(const SymExpr &e) {
    if (e.terms_.empty())
      return "0";
    if (e.terms_.size() == 1) {
      const Term &t = e.terms_[0];
      if (t.factors.empty())
        return std::to_string(t.coeff);
      std::string f = factorsStr(t.factors);
      if (t.coeff == 1)
        return f;
      if (t.coeff == -1)
        return "-" + f;
      if (t.coeff == kMin)
        return std::to_string(t.coeff) + "*" + f;
      if (t.coeff < 0)
        return "-" + f + "*" + std::to_string(-t.coeff);
      return f + "*" + std::to_string(t.coeff);
    }
    std::string out;
    for (size_t i = 0; i < e.terms_.size(); ++i) {
      const Term &t = e.terms_[i];
      // kMin has no positive magnitude: it prints as a negative literal ("+ -9223...*a").
      bool minus = t.coeff < 0 && t.coeff != kMin;
      int64_t magnitude = minus ? -t.coeff : t.coeff;
      if (i == 0)
        out += minus ? "-" : "";
      else
        out += minus ? " - " : " + ";
      if (t.factors.empty())
        out += std::to_string(magnitude);
      else if (magnitude == 1)
        out += factorsStr(t.factors);
      else
        out += std::to_string(magnitude) + "*" + factorsStr(t.factors);
    }
    return out;
  }

  // ---- Evaluation -------------------------------------------------------------------------

  static int64_t evalAtom(const Atom &a, const ValueOf &valueOf) {
    if (a.kind == AtomKind::Symbol) {
      std::optional<int64_t> v = valueOf(a.name);
      if (!v)
        throw EvalError{"unbound symbol '" + a.name + "'"};
      return *v;
    }
    int64_t x = eval(a.op->lhs, valueOf), y = eval(a.op->rhs, valueOf), r = 0;
    switch (a.kind) {
    case AtomKind::Symbol: break;
    case AtomKind::FloorDiv:
    case AtomKind::CeilDiv:
      if (y == 0)
        throw EvalError{"division by zero in " + atomStr(a)};
      if (!(a.kind == AtomKind::FloorDiv ? floorDivChecked(x, y, r) : ceilDivChecked(x, y, r)))
        throw EvalError{"int64 overflow evaluating " + atomStr(a)};
      return r;
    case AtomKind::Mod:
      if (y == 0)
        throw EvalError{"modulo by zero in " + atomStr(a)};
      return floorMod(x, y);
    case AtomKind::Max: return std::max(x, y);
    case AtomKind::Min: return std::min(x, y);
    }
    return r;
  }

  static int64_t eval(const SymExpr &e, const ValueOf &valueOf) {
    __int128 sum = 0;
    for (const Term &t : e.terms_) {
      std::vector<int64_t> values;
      values.reserve(t.factors.size());
      for (const Factor &f : t.factors)
        values.push_back(evalAtom(f.atom, valueOf));
      // A zero factor makes the term 0; without one every partial product is at most the
      // term in magnitude, so the checks below fail only when the term overflows.
      if (std::find(values.begin(), values.end(), 0) != values.end())
        continue;
      int64_t v = t.coeff;
      for (size_t i = 0; i < values.size(); ++i) {
        int64_t p;
        if (!powChecked(values[i], t.factors[i].power, p) || __builtin_mul_overflow(v, p, &v))
          throw EvalError{"int64 overflow evaluating " + make({t}).str()};
      }
      sum += v;
    }
    if (sum < kMin || sum > kMax)
      throw EvalError{"int64 overflow evaluating " + e.str()};
    return (int64_t)sum;
  }

  // ---- Bounds -----------------------------------------------------------------------------

  static Interval atomBounds(const Atom &a, const RangeOf &rangeOf) {
    if (a.kind == AtomKind::Symbol) {
      if (auto r = rangeOf(a.name))
        return {r->first, r->second};
      return {0, kMax};
    }
    Interval x = bounds(a.op->lhs, rangeOf), y = bounds(a.op->rhs, rangeOf);
    switch (a.kind) {
    case AtomKind::Symbol: break;
    case AtomKind::Max: return {std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
    case AtomKind::Min: return {std::min(x.lo, y.lo), std::min(x.hi, y.hi)};
    case AtomKind::FloorDiv:
    case AtomKind::CeilDiv:
    case AtomKind::Mod: {
      std::vector<Interval> parts = nonzeroParts(y);
      if (parts.empty()) // The divisor is always 0: evaluate() never succeeds.
        return {kMin, kMax};
      Interval hull{kMax, kMin};
      for (Interval d : parts) {
        Interval r = a.kind == AtomKind::Mod ? modInterval(x, d)
                                             : divInterval(x, d, a.kind == AtomKind::CeilDiv);
        hull = {std::min(hull.lo, r.lo), std::max(hull.hi, r.hi)};
      }
      return hull;
    }
    }
    return {kMin, kMax};
  }

  /// Each term's interval, clamped (a term evaluate() computes fits int64), summed exactly.
  static Interval bounds(const SymExpr &e, const RangeOf &rangeOf) {
    __int128 lo = 0, hi = 0;
    for (const Term &t : e.terms_) {
      Interval v{t.coeff, t.coeff};
      for (const Factor &f : t.factors)
        v = mulIntervals(v, powInterval(atomBounds(f.atom, rangeOf), f.power));
      lo += v.lo;
      hi += v.hi;
    }
    return {clamp128(lo), clamp128(hi)};
  }

  // ---- Other ------------------------------------------------------------------------------

  static void collectSymbols(const SymExpr &e, std::set<std::string> &out) {
    for (const Term &t : e.terms_)
      for (const Factor &f : t.factors) {
        if (f.atom.kind == AtomKind::Symbol) {
          out.insert(f.atom.name);
        } else {
          collectSymbols(f.atom.op->lhs, out);
          collectSymbols(f.atom.op->rhs, out);
        }
      }
  }

  static SymExpr rebuild(AtomKind kind, const SymExpr &a, const SymExpr &b) {
    switch (kind) {
    case AtomKind::FloorDiv: return SymExpr::floorDiv(a, b);
    case AtomKind::CeilDiv: return SymExpr::ceilDiv(a, b);
    case AtomKind::Mod: return SymExpr::mod(a, b);
    case AtomKind::Max: return SymExpr::max(a, b);
    case AtomKind::Min: return SymExpr::min(a, b);
    case AtomKind::Symbol: break;
    }
    throw std::logic_error("SymExpr: rebuild of a symbol");
  }

  static SymExpr substitute(const SymExpr &e, const std::map<std::string, SymExpr> &repl) {
    SymExpr result;
    for (const Term &t : e.terms_) {
      SymExpr term(t.coeff);
      for (const Factor &f : t.factors) {
        SymExpr base;
        if (f.atom.kind == AtomKind::Symbol) {
          auto it = repl.find(f.atom.name);
          base = it != repl.end() ? it->second : make({Term{1, {Factor{f.atom, 1}}}});
        } else {
          base = rebuild(f.atom.kind, substitute(f.atom.op->lhs, repl),
                         substitute(f.atom.op->rhs, repl));
        }
        term = multiply(term, power(base, f.power));
      }
      result = combine(result, term, false);
    }
    return result;
  }

  static SymExpr minMax(const SymExpr &a, const SymExpr &b, bool isMax) {
    auto ca = a.constant(), cb = b.constant();
    if (ca && cb)
      return isMax ? std::max(*ca, *cb) : std::min(*ca, *cb);
    if (a == b)
      return a;
    try {
      if (auto d = combine(a, b, true).constant())
        return (*d >= 0) == isMax ? a : b;
    } catch (const std::overflow_error &) {
      // a - b does not fit: no simplification.
    }
    return b < a ? opaque(isMax ? AtomKind::Max : AtomKind::Min, b, a)
                 : opaque(isMax ? AtomKind::Max : AtomKind::Min, a, b);
  }
};

// ---- Construction and queries ---------------------------------------------------------------

SymExpr::SymExpr() = default;

SymExpr::SymExpr(int64_t value) {
  if (value != 0)
    terms_.push_back(Term{value, {}});
}

SymExpr SymExpr::symbol(std::string_view name) {
  if (!isIdentifier(name))
    throw std::invalid_argument("invalid symbol name '" + std::string(name) +
                                "': a symbol is an identifier [A-Za-z_][A-Za-z0-9_]*");
  Atom atom;
  atom.name = std::string(name);
  return Impl::make({Term{1, {Factor{std::move(atom), 1}}}});
}

std::string SymExpr::str() const { return Impl::str(*this); }

std::optional<int64_t> SymExpr::constant() const {
  if (terms_.empty())
    return 0;
  if (terms_.size() == 1 && terms_[0].factors.empty())
    return terms_[0].coeff;
  return std::nullopt;
}

bool SymExpr::isConstant() const { return constant().has_value(); }

std::optional<std::string> SymExpr::symbolName() const {
  if (terms_.size() == 1 && terms_[0].coeff == 1 && terms_[0].factors.size() == 1 &&
      terms_[0].factors[0].power == 1 && terms_[0].factors[0].atom.kind == AtomKind::Symbol)
    return terms_[0].factors[0].atom.name;
  return std::nullopt;
}

// ---- Arithmetic -----------------------------------------------------------------------------

SymExpr operator+(const SymExpr &a, const SymExpr &b) {
  return SymExpr::Impl::combine(a, b, false);
}
SymExpr operator-(const SymExpr &a, const SymExpr &b) {
  return SymExpr::Impl::combine(a, b, true);
}
SymExpr operator*(const SymExpr &a, const SymExpr &b) { return SymExpr::Impl::multiply(a, b); }
SymExpr operator-(const SymExpr &a) { return SymExpr::Impl::combine(SymExpr(), a, true); }

SymExpr &SymExpr::operator+=(const SymExpr &b) { return *this = *this + b; }
SymExpr &SymExpr::operator-=(const SymExpr &b) { return *this = *this - b; }
SymExpr &SymExpr::operator*=(const SymExpr &b) { return *this = *this * b; }

SymExpr SymExpr::floorDiv(const SymExpr &a, const SymExpr &b) {
  auto ca = a.constant(), cb = b.constant();
  if (cb && *cb == 0)
    return Impl::opaque(AtomKind::FloorDiv, a, b);
  if (ca && cb) {
    int64_t q;
    if (!floorDivChecked(*ca, *cb, q))
      overflow("floordiv(" + a.str() + ", " + b.str() + ")");
    return q;
  }
  if (auto q = divideExactly(a, b))
    return *q;
  if (SymExpr quotient, rest; cb && Impl::splitMultiples(a, *cb, quotient, rest))
    return quotient + floorDiv(rest, b);
  return Impl::opaque(AtomKind::FloorDiv, a, b);
}

SymExpr SymExpr::ceilDiv(const SymExpr &a, const SymExpr &b) {
  auto ca = a.constant(), cb = b.constant();
  if (cb && *cb == 0)
    return Impl::opaque(AtomKind::CeilDiv, a, b);
  if (ca && cb) {
    int64_t q;
    if (!ceilDivChecked(*ca, *cb, q))
      overflow("ceildiv(" + a.str() + ", " + b.str() + ")");
    return q;
  }
  if (auto q = divideExactly(a, b))
    return *q;
  if (SymExpr quotient, rest; cb && Impl::splitMultiples(a, *cb, quotient, rest))
    return quotient + ceilDiv(rest, b);
  return Impl::opaque(AtomKind::CeilDiv, a, b);
}

SymExpr SymExpr::mod(const SymExpr &a, const SymExpr &b) {
  auto ca = a.constant(), cb = b.constant();
  if (cb && *cb == 0)
    return Impl::opaque(AtomKind::Mod, a, b);
  if (ca && cb)
    return floorMod(*ca, *cb);
  if (divideExactly(a, b))
    return 0;
  if (SymExpr quotient, rest; cb && Impl::splitMultiples(a, *cb, quotient, rest))
    return mod(rest, b);
  return Impl::opaque(AtomKind::Mod, a, b);
}

SymExpr SymExpr::max(const SymExpr &a, const SymExpr &b) { return Impl::minMax(a, b, true); }
SymExpr SymExpr::min(const SymExpr &a, const SymExpr &b) { return Impl::minMax(a, b, false); }

std::optional<SymExpr> SymExpr::divideExactly(const SymExpr &a, const SymExpr &b) {
  if (b.terms_.empty())
    return std::nullopt;
  if (a.terms_.empty())
    return SymExpr();
  auto divideTerm = [](const Term &x, const Term &y) -> std::optional<Term> {
    if ((x.coeff == kMin && y.coeff == -1) || x.coeff % y.coeff != 0)
      return std::nullopt;
    auto f = Impl::divideMonomials(x.factors, y.factors);
    if (!f)
      return std::nullopt;
    return Term{x.coeff / y.coeff, std::move(*f)};
  };
  try {
    if (b.terms_.size() == 1) {
      // Dividing every monomial by one monomial keeps their order.
      std::vector<Term> q;
      for (const Term &t : a.terms_) {
        auto d = divideTerm(t, b.terms_[0]);
        if (!d)
          return std::nullopt;
        q.push_back(std::move(*d));
      }
      return Impl::make(std::move(q));
    }
    // Multivariate division by the leading term: when a == q * b, the leading term of each
    // remainder (q - q') * b is the product of leading terms, so it divides; it decreases in
    // a monomial order, so the loop ends.
    SymExpr rem = a, quotient;
    for (int step = 0; !rem.terms_.empty(); ++step) {
      if (step == kMaxDivisionSteps)
        return std::nullopt;
      auto d = divideTerm(rem.terms_[0], b.terms_[0]);
      if (!d)
        return std::nullopt;
      SymExpr t = Impl::make({std::move(*d)});
      quotient += t;
      rem -= t * b;
    }
    return quotient;
  } catch (const std::overflow_error &) {
    return std::nullopt;
  } catch (const std::length_error &) {
    return std::nullopt;
  }
}

// ---- Comparison -----------------------------------------------------------------------------

bool SymExpr::operator==(const SymExpr &other) const { return Impl::compare(*this, other) == 0; }
bool SymExpr::operator<(const SymExpr &other) const { return Impl::compare(*this, other) < 0; }

size_t SymExpr::hash() const {
  uint64_t h = 0x2545f4914f6cdd1dULL;
  auto mix = [&](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  for (const Term &t : terms_) {
    mix((uint64_t)t.coeff);
    for (const Factor &f : t.factors) {
      mix((uint64_t)f.atom.kind);
      if (f.atom.kind == AtomKind::Symbol) {
        mix(std::hash<std::string>()(f.atom.name));
      } else {
        mix(f.atom.op->lhs.hash());
        mix(f.atom.op->rhs.hash());
      }
      mix((uint64_t)f.power);
    }
    mix(0xff);
  }
  return (size_t)h;
}

// ---- Symbols, substitution, evaluation, bounds ----------------------------------------------

std::vector<SymExpr::TermView> SymExpr::terms() const {
  std::vector<TermView> out;
  for (const Term &t : terms_) {
    TermView view{t.coeff, {}};
    for (const Factor &f : t.factors) {
      AtomView atom{f.atom.kind, f.atom.name, {}};
      if (f.atom.op)
        atom.operands = {f.atom.op->lhs, f.atom.op->rhs};
      view.factors.emplace_back(std::move(atom), f.power);
    }
    out.push_back(std::move(view));
  }
  return out;
}

std::vector<std::string> SymExpr::symbols() const {
  std::set<std::string> names;
  Impl::collectSymbols(*this, names);
  return std::vector<std::string>(names.begin(), names.end());
}

SymExpr SymExpr::substitute(const std::map<std::string, SymExpr> &replacements) const {
  return Impl::substitute(*this, replacements);
}

std::optional<int64_t>
SymExpr::evaluate(const std::function<std::optional<int64_t>(const std::string &)> &valueOf,
                  std::string *error) const {
  try {
    return Impl::eval(*this, valueOf);
  } catch (const EvalError &e) {
    if (error)
      *error = e.message;
    return std::nullopt;
  }
}

std::pair<int64_t, int64_t> SymExpr::bounds(
    const std::function<std::optional<std::pair<int64_t, int64_t>>(const std::string &)> &rangeOf)
    const {
  Interval r = Impl::bounds(*this, rangeOf);
  return {r.lo, r.hi};
}

// ---- Parsing --------------------------------------------------------------------------------

namespace {

/// Recursive descent over
///   expr    := term (('+' | '-') term)*
///   term    := unary ('*' unary)*
///   unary   := ('-' | '+') unary | power
///   power   := primary ('^' integer)?
///   primary := integer | identifier | function '(' expr ',' expr ')' | '(' expr ')'
class Parser {
public:
  explicit Parser(std::string_view text) : text_(text) {}

  SymExpr parseAll() {
    SymExpr e = parseExpr();
    skipSpace();
    if (pos_ != text_.size())
      fail(pos_, "unexpected " + describe(pos_) + " at offset " + std::to_string(pos_) +
                     ": expected an operator (+, -, *, ^) or the end of the text");
    return e;
  }

private:
  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;

  [[noreturn]] static void fail(size_t offset, std::string message) {
    throw ParseError{offset, std::move(message)};
  }

  std::string describe(size_t at) const {
    if (at >= text_.size())
      return "the end of the text";
    unsigned char c = (unsigned char)text_[at];
    if (c >= 0x21 && c <= 0x7e)
      return std::string("'") + (char)c + "'";
    static const char *hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
  }

  void skipSpace() {
    while (pos_ < text_.size() && isSpace(text_[pos_]))
      ++pos_;
  }

  bool peek(char c) {
    skipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  void expect(char c, const std::string &context) {
    if (!peek(c))
      fail(pos_, std::string("expected '") + c + "' at offset " + std::to_string(pos_) +
                     ", found " + describe(pos_) + context);
    ++pos_;
  }

  /// Runs `build`, reporting an overflow or a too large product at `offset`.
  template <typename F> SymExpr at(size_t offset, F build) {
    try {
      return build();
    } catch (const std::overflow_error &e) {
      fail(offset, std::string(e.what()) + " (at offset " + std::to_string(offset) + ")");
    } catch (const std::length_error &e) {
      fail(offset, std::string(e.what()) + " (at offset " + std::to_string(offset) + ")");
    }
  }

  SymExpr parseExpr() {
    SymExpr lhs = parseTerm();
    while (peek('+') || peek('-')) {
      size_t op = pos_;
      bool minus = text_[pos_++] == '-';
      SymExpr rhs = parseTerm();
      lhs = at(op, [&] { return minus ? lhs - rhs : lhs + rhs; });
    }
    return lhs;
  }

  SymExpr parseTerm() {
    SymExpr lhs = parseUnary();
    while (peek('*')) {
      size_t op = pos_++;
      SymExpr rhs = parseUnary();
      lhs = at(op, [&] { return lhs * rhs; });
    }
    return lhs;
  }

  SymExpr parseUnary() {
    struct Depth {
      int &d;
      ~Depth() { --d; }
    } guard{++depth_};
    if (depth_ > kMaxParseDepth)
      fail(pos_, "expression nested deeper than " + std::to_string(kMaxParseDepth) +
                     " levels at offset " + std::to_string(pos_));
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '+') {
      ++pos_;
      return parseUnary();
    }
    if (pos_ < text_.size() && text_[pos_] == '-') {
      size_t op = pos_++;
      skipSpace();
      // -9223372036854775808 is a literal: its magnitude alone is out of range.
      static const std::string_view minMagnitude = "9223372036854775808";
      size_t end = pos_;
      while (end < text_.size() && isDigit(text_[end]))
        ++end;
      size_t next = end;
      while (next < text_.size() && isSpace(text_[next]))
        ++next;
      if (text_.substr(pos_, end - pos_) == minMagnitude &&
          (end == text_.size() || !isIdentChar(text_[end])) &&
          (next == text_.size() || text_[next] != '^')) {
        pos_ = end;
        return SymExpr(kMin);
      }
      SymExpr operand = parseUnary();
      return at(op, [&] { return -operand; });
    }
    return parsePower();
  }

  SymExpr parsePower() {
    SymExpr base = parsePrimary();
    if (!peek('^'))
      return base;
    size_t op = pos_++;
    skipSpace();
    if (pos_ >= text_.size() || !isDigit(text_[pos_]))
      fail(pos_, "expected an integer exponent at offset " + std::to_string(pos_) + ", found " +
                     describe(pos_));
    int64_t exponent = parseInteger();
    return at(op, [&] {
      SymExpr result(1);
      for (int64_t p = exponent; p; p >>= 1) {
        if (p & 1)
          result *= base;
        if (p > 1)
          base *= base;
      }
      return result;
    });
  }

  int64_t parseInteger() {
    size_t start = pos_;
    while (pos_ < text_.size() && isDigit(text_[pos_]))
      ++pos_;
    if (pos_ < text_.size() && isIdentStart(text_[pos_])) {
      size_t end = pos_;
      while (end < text_.size() && isIdentChar(text_[end]))
        ++end;
      fail(start, "invalid identifier '" + std::string(text_.substr(start, end - start)) +
                      "' at offset " + std::to_string(start) +
                      ": an identifier starts with a letter or '_'");
    }
    int64_t value = 0;
    for (size_t i = start; i < pos_; ++i)
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text_[i] - '0', &value))
        fail(start, "integer literal " + std::string(text_.substr(start, pos_ - start)) +
                        " at offset " + std::to_string(start) + " is out of the int64 range");
    return value;
  }

  SymExpr parsePrimary() {
    skipSpace();
    size_t start = pos_;
    if (pos_ >= text_.size())
      fail(pos_, "expected an expression at offset " + std::to_string(pos_) +
                     ", found the end of the text");
    char c = text_[pos_];
    if (isDigit(c))
      return SymExpr(parseInteger());
    if (c == '(') {
      ++pos_;
      SymExpr e = parseExpr();
      expect(')', " (to close the '(' at offset " + std::to_string(start) + ")");
      return e;
    }
    if (!isIdentStart(c))
      fail(pos_, "expected an expression at offset " + std::to_string(pos_) + ", found " +
                     describe(pos_));
    while (pos_ < text_.size() && isIdentChar(text_[pos_]))
      ++pos_;
    std::string name(text_.substr(start, pos_ - start));
    if (!peek('('))
      return SymExpr::symbol(name);
    static const char *const functions[] = {"floordiv", "ceildiv", "mod", "max", "min"};
    int which = -1;
    for (int i = 0; i < 5; ++i)
      if (name == functions[i])
        which = i;
    if (which < 0)
      fail(start, "unknown function '" + name + "' at offset " + std::to_string(start) +
                      " (known: floordiv, ceildiv, mod, max, min)");
    ++pos_;
    std::string context = " (" + name + " takes two arguments)";
    SymExpr a = parseExpr();
    expect(',', context);
    SymExpr b = parseExpr();
    expect(')', context);
    return at(start, [&] {
      switch (which) {
      case 0: return SymExpr::floorDiv(a, b);
      case 1: return SymExpr::ceilDiv(a, b);
      case 2: return SymExpr::mod(a, b);
      case 3: return SymExpr::max(a, b);
      default: return SymExpr::min(a, b);
      }
    });
  }
};

} // namespace

std::optional<SymExpr> SymExpr::parse(std::string_view text, std::string *error) {
  try {
    return Parser(text).parseAll();
  } catch (const ParseError &e) {
    if (error)
      *error = e.message;
    return std::nullopt;
  }
}

// ---- Shapes ---------------------------------------------------------------------------------

SymExpr productOf(const std::vector<SymExpr> &dims) {
  SymExpr p(1);
  for (const SymExpr &d : dims)
    p *= d;
  return p;
}

std::string shapeString(const std::vector<SymExpr> &dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      out += 'x';
    if (dims[i].terms_.size() > 1)
      out += "(" + dims[i].str() + ")";
    else
      out += dims[i].str();
  }
  return out;
}

} // namespace tcc
