//===- SymExprTest.cpp - Unit tests of tcc::SymExpr -----------------------===//
//
// The canonical form (equal polynomials compare equal), the text form (parse(str(e)) == e over
// random expressions, parse errors), the simplifications, evaluation against a direct
// evaluation of random expression trees, and interval bounds.
//
//===----------------------------------------------------------------------===//

#include "tcc/Support/SymExpr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <unordered_set>

using namespace tcc;

namespace tcc {
/// Prints a SymExpr in gtest's messages by its text form.
void PrintTo(const SymExpr &e, std::ostream *os) { *os << '"' << e.str() << '"'; }
} // namespace tcc

namespace {

using Binding = std::map<std::string, int64_t>;
using Ranges = std::map<std::string, std::pair<int64_t, int64_t>>;

SymExpr sym(const char *name) { return SymExpr::symbol(name); }

SymExpr parsed(const std::string &text) {
  std::string error;
  std::optional<SymExpr> e = SymExpr::parse(text, &error);
  if (!e)
    ADD_FAILURE() << "parse(\"" << text << "\") failed: " << error;
  return e ? *e : SymExpr();
}

std::function<std::optional<int64_t>(const std::string &)> valuesOf(const Binding &b) {
  return [b](const std::string &name) -> std::optional<int64_t> {
    auto it = b.find(name);
    if (it == b.end())
      return std::nullopt;
    return it->second;
  };
}

std::function<std::optional<std::pair<int64_t, int64_t>>(const std::string &)>
rangesOf(const Ranges &r) {
  return [r](const std::string &name) -> std::optional<std::pair<int64_t, int64_t>> {
    auto it = r.find(name);
    if (it == r.end())
      return std::nullopt;
    return it->second;
  };
}

std::optional<int64_t> eval(const SymExpr &e, const Binding &b, std::string *error = nullptr) {
  return e.evaluate(valuesOf(b), error);
}

/// The reference semantics of floor division and modulo, through doubles (exact for the small
/// values the tests give them): Python's // and %.
int64_t refFloorDiv(int64_t a, int64_t b) { return (int64_t)std::floor((double)a / (double)b); }
int64_t refCeilDiv(int64_t a, int64_t b) { return (int64_t)std::ceil((double)a / (double)b); }
int64_t refMod(int64_t a, int64_t b) { return a - b * refFloorDiv(a, b); }

// ---- Random expression trees ----------------------------------------------------------------

/// An expression as it was built, evaluated directly (no canonical form).
struct Tree {
  enum Kind { Const, Sym, Add, Sub, Mul, Neg, FloorDiv, CeilDiv, Mod, Max, Min } kind = Const;
  int64_t value = 0;
  std::string name;
  std::vector<Tree> kids;
};

const char *const kSymbols[] = {"a", "b", "c"};

Tree randomTree(std::mt19937_64 &rng, int depth, int numSymbols) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Tree t;
  if (depth == 0 || pick(0, 3) == 0) {
    if (pick(0, 1) == 0) {
      t.kind = Tree::Const;
      t.value = pick(-4, 6);
    } else {
      t.kind = Tree::Sym;
      t.name = kSymbols[pick(0, numSymbols - 1)];
    }
    return t;
  }
  t.kind = (Tree::Kind)pick(Tree::Add, Tree::Min);
  t.kids.push_back(randomTree(rng, depth - 1, numSymbols));
  if (t.kind != Tree::Neg)
    t.kids.push_back(randomTree(rng, depth - 1, numSymbols));
  return t;
}

std::string treeStr(const Tree &t) {
  static const char *const names[] = {"", "", "+", "-", "*", "neg", "floordiv",
                                      "ceildiv", "mod", "max", "min"};
  switch (t.kind) {
  case Tree::Const: return std::to_string(t.value);
  case Tree::Sym: return t.name;
  case Tree::Neg: return "-(" + treeStr(t.kids[0]) + ")";
  case Tree::Add:
  case Tree::Sub:
  case Tree::Mul:
    return "(" + treeStr(t.kids[0]) + " " + names[t.kind] + " " + treeStr(t.kids[1]) + ")";
  default:
    return std::string(names[t.kind]) + "(" + treeStr(t.kids[0]) + ", " + treeStr(t.kids[1]) +
           ")";
  }
}

SymExpr build(const Tree &t) {
  switch (t.kind) {
  case Tree::Const: return t.value;
  case Tree::Sym: return SymExpr::symbol(t.name);
  case Tree::Add: return build(t.kids[0]) + build(t.kids[1]);
  case Tree::Sub: return build(t.kids[0]) - build(t.kids[1]);
  case Tree::Mul: return build(t.kids[0]) * build(t.kids[1]);
  case Tree::Neg: return -build(t.kids[0]);
  case Tree::FloorDiv: return SymExpr::floorDiv(build(t.kids[0]), build(t.kids[1]));
  case Tree::CeilDiv: return SymExpr::ceilDiv(build(t.kids[0]), build(t.kids[1]));
  case Tree::Mod: return SymExpr::mod(build(t.kids[0]), build(t.kids[1]));
  case Tree::Max: return SymExpr::max(build(t.kids[0]), build(t.kids[1]));
  case Tree::Min: return SymExpr::min(build(t.kids[0]), build(t.kids[1]));
  }
  return SymExpr();
}

/// The tree's value at `b`, nullopt on a division by zero or a value beyond 2^62. `maxAbs`
/// grows to a bound on every value the canonical form's evaluation computes: the tree's
/// polynomial parts evaluated with every constant and value made positive (a bound on each
/// expanded term), opaque nodes by their value.
std::optional<int64_t> direct(const Tree &t, const Binding &b, double &maxAbs) {
  auto fits = [](__int128 v) -> std::optional<int64_t> {
    if (v > ((__int128)1 << 62) || v < -((__int128)1 << 62))
      return std::nullopt;
    return (int64_t)v;
  };
  std::optional<int64_t> x, y;
  if (!t.kids.empty() && !(x = direct(t.kids[0], b, maxAbs)))
    return std::nullopt;
  if (t.kids.size() > 1 && !(y = direct(t.kids[1], b, maxAbs)))
    return std::nullopt;
  switch (t.kind) {
  case Tree::Const: return t.value;
  case Tree::Sym: return b.at(t.name);
  case Tree::Add: return fits((__int128)*x + *y);
  case Tree::Sub: return fits((__int128)*x - *y);
  case Tree::Mul: return fits((__int128)*x * *y);
  case Tree::Neg: return -*x;
  case Tree::FloorDiv: return *y == 0 ? std::nullopt : std::optional(refFloorDiv(*x, *y));
  case Tree::CeilDiv: return *y == 0 ? std::nullopt : std::optional(refCeilDiv(*x, *y));
  case Tree::Mod: return *y == 0 ? std::nullopt : std::optional(refMod(*x, *y));
  case Tree::Max: return std::max(*x, *y);
  case Tree::Min: return std::min(*x, *y);
  }
  return std::nullopt;
}

/// The positive bound of `t`'s expanded terms described at direct(); records it in `maxAbs`.
double absBound(const Tree &t, const Binding &b, double &maxAbs) {
  double r = 0;
  switch (t.kind) {
  case Tree::Const: r = std::fabs((double)t.value); break;
  case Tree::Sym: r = std::fabs((double)b.at(t.name)); break;
  case Tree::Add:
  case Tree::Sub: r = absBound(t.kids[0], b, maxAbs) + absBound(t.kids[1], b, maxAbs); break;
  case Tree::Mul: r = absBound(t.kids[0], b, maxAbs) * absBound(t.kids[1], b, maxAbs); break;
  case Tree::Neg: r = absBound(t.kids[0], b, maxAbs); break;
  default: {
    absBound(t.kids[0], b, maxAbs);
    absBound(t.kids[1], b, maxAbs);
    double unused = 0;
    r = std::fabs((double)*direct(t, b, unused));
  }
  }
  maxAbs = std::max(maxAbs, r);
  return r;
}

Binding randomBinding(std::mt19937_64 &rng, int lo, int hi) {
  Binding b;
  for (const char *s : kSymbols)
    b[s] = std::uniform_int_distribution<int>(lo, hi)(rng);
  return b;
}

} // namespace

// ---- Canonical form -------------------------------------------------------------------------

TEST(SymExpr, CanonicalEquality) {
  SymExpr a = sym("a"), b = sym("b");
  EXPECT_EQ(a * b, b * a);
  EXPECT_EQ(a + b, b + a);
  EXPECT_EQ((a + b) * (a + b), a * a + 2 * a * b + b * b);
  EXPECT_EQ((a + b) * (a - b), a * a - b * b);
  EXPECT_EQ((a + 1) - a, SymExpr(1));
  EXPECT_EQ(2 * a - a - a, SymExpr());
  EXPECT_EQ(a * 1, a);
  EXPECT_EQ(a + 0, a);
  EXPECT_EQ(a * 0, SymExpr(0));
  EXPECT_EQ(-(-a), a);
  EXPECT_EQ(a * (b * a), (a * a) * b);
  EXPECT_NE(a * a, a);
  EXPECT_NE(a + b, a * b);
  EXPECT_NE(a, b);
  EXPECT_NE(SymExpr(1), SymExpr(2));
  SymExpr c = a;
  c += b;
  c *= 3;
  c -= b;
  EXPECT_EQ(c, 3 * a + 2 * b);
  // Opaque nodes are atoms of the polynomial, compared by their canonical operands.
  EXPECT_EQ(SymExpr::floorDiv(a + b, 2) * 2, 2 * SymExpr::floorDiv(b + a, 2));
  EXPECT_EQ(SymExpr::floorDiv(a, 2) - SymExpr::floorDiv(a, 2), SymExpr());
  EXPECT_NE(SymExpr::floorDiv(a, 2), SymExpr::ceilDiv(a, 2));
  EXPECT_NE(SymExpr::floorDiv(a, 2), SymExpr::floorDiv(a, 3));
}

TEST(SymExpr, ConstantsAndSymbolNames) {
  EXPECT_EQ(SymExpr().constant(), std::optional<int64_t>(0));
  EXPECT_EQ(SymExpr(-3).constant(), std::optional<int64_t>(-3));
  EXPECT_TRUE(SymExpr(7).isConstant());
  EXPECT_FALSE(sym("a").isConstant());
  EXPECT_EQ((sym("a") - sym("a") + 5).constant(), std::optional<int64_t>(5));
  EXPECT_EQ(sym("seq").symbolName(), std::optional<std::string>("seq"));
  EXPECT_EQ((2 * sym("seq")).symbolName(), std::nullopt);
  EXPECT_EQ((sym("seq") * sym("seq")).symbolName(), std::nullopt);
  EXPECT_EQ((sym("seq") + 1).symbolName(), std::nullopt);
  EXPECT_EQ(SymExpr(1).symbolName(), std::nullopt);
  EXPECT_EQ(SymExpr::symbol("_x9").symbolName(), std::optional<std::string>("_x9"));
  EXPECT_THROW(SymExpr::symbol(""), std::invalid_argument);
  EXPECT_THROW(SymExpr::symbol("9x"), std::invalid_argument);
  EXPECT_THROW(SymExpr::symbol("a-b"), std::invalid_argument);
  EXPECT_THROW(SymExpr::symbol("a b"), std::invalid_argument);
  try {
    SymExpr::symbol("9x");
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("'9x'"), std::string::npos) << e.what();
  }
}

TEST(SymExpr, Printing) {
  SymExpr batch = sym("batch"), seq = sym("seq");
  EXPECT_EQ((batch * seq * 768).str(), "batch*seq*768");
  EXPECT_EQ((768 * seq * batch).str(), "batch*seq*768");
  EXPECT_EQ((1 + seq * 2).str(), "2*seq + 1");
  EXPECT_EQ(SymExpr::floorDiv(seq + 1, 2).str(), "floordiv(seq + 1, 2)");
  EXPECT_EQ(SymExpr::max(4, seq).str(), "max(seq, 4)");
  EXPECT_EQ(SymExpr(-3).str(), "-3");
  EXPECT_EQ(SymExpr().str(), "0");
  EXPECT_EQ((seq * seq).str(), "seq^2");
  EXPECT_EQ((-seq).str(), "-seq");
  EXPECT_EQ((-3 * seq).str(), "-seq*3");
  EXPECT_EQ((sym("a") - sym("b")).str(), "a - b");
  EXPECT_EQ((sym("b") - sym("a")).str(), "-a + b");
  EXPECT_EQ((seq * seq - 2 * seq * batch + 1 - seq).str(), "-2*batch*seq + seq^2 - seq + 1");
  EXPECT_EQ(productOf({batch, 128, 768}).str(), "batch*98304");
  EXPECT_EQ(productOf({}), SymExpr(1));
  EXPECT_EQ(shapeString({batch, 128, 768}), "batchx128x768");
  EXPECT_EQ(shapeString({seq + 1, 4}), "(seq + 1)x4");
  EXPECT_EQ(shapeString({SymExpr::floorDiv(seq + 1, 2), batch * seq}),
            "floordiv(seq + 1, 2)xbatch*seq");
  EXPECT_EQ(shapeString({}), "");
}

// ---- Text form ------------------------------------------------------------------------------

TEST(SymExpr, ParseReadsTheGrammar) {
  SymExpr a = sym("a"), b = sym("b");
  EXPECT_EQ(parsed("  a*b  +\t2 "), a * b + 2);
  EXPECT_EQ(parsed("-a"), -a);
  EXPECT_EQ(parsed("--a"), a);
  EXPECT_EQ(parsed("+a - -b"), a + b);
  EXPECT_EQ(parsed("2*(a + b)"), 2 * a + 2 * b);
  EXPECT_EQ(parsed("-a^2"), -(a * a));
  EXPECT_EQ(parsed("(a + 1)^2"), a * a + 2 * a + 1);
  EXPECT_EQ(parsed("a^0"), SymExpr(1));
  EXPECT_EQ(parsed("2^10"), SymExpr(1024));
  EXPECT_EQ(parsed("floordiv(a,2)"), SymExpr::floorDiv(a, 2));
  EXPECT_EQ(parsed("ceildiv( a , b )"), SymExpr::ceilDiv(a, b));
  EXPECT_EQ(parsed("mod(a, 3)"), SymExpr::mod(a, 3));
  EXPECT_EQ(parsed("max(b, a)"), SymExpr::max(a, b));
  EXPECT_EQ(parsed("min(a, b)"), SymExpr::min(b, a));
  EXPECT_EQ(parsed("floordiv(7, 2)"), SymExpr(3));
  EXPECT_EQ(parsed("9223372036854775807"), SymExpr(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(parsed("-9223372036854775808"), SymExpr(std::numeric_limits<int64_t>::min()));
  // Names of functions are symbols when no '(' follows.
  EXPECT_EQ(parsed("max + 1"), SymExpr::symbol("max") + 1);
}

TEST(SymExpr, ParseErrors) {
  auto errorOf = [](const std::string &text) {
    std::string error;
    std::optional<SymExpr> e = SymExpr::parse(text, &error);
    EXPECT_FALSE(e) << "parse(\"" << text << "\") = " << e->str();
    EXPECT_FALSE(error.empty()) << text;
    return error;
  };
  auto has = [](const std::string &error, const std::string &part) {
    return error.find(part) != std::string::npos;
  };
  std::string e;
  e = errorOf("");
  EXPECT_TRUE(has(e, "offset 0") && has(e, "end of the text")) << e;
  e = errorOf("   ");
  EXPECT_TRUE(has(e, "offset 3") && has(e, "expected an expression")) << e;
  e = errorOf("a +");
  EXPECT_TRUE(has(e, "offset 3") && has(e, "expected an expression")) << e;
  e = errorOf("floordiv(a)");
  EXPECT_TRUE(has(e, "offset 10") && has(e, "','") && has(e, "two arguments")) << e;
  e = errorOf("floordiv(a, b, c)");
  EXPECT_TRUE(has(e, "offset 13") && has(e, "')'")) << e;
  e = errorOf("3 4");
  EXPECT_TRUE(has(e, "offset 2") && has(e, "'4'")) << e;
  e = errorOf("foo(a,b)");
  EXPECT_TRUE(has(e, "unknown function 'foo'") && has(e, "offset 0")) << e;
  e = errorOf("2a");
  EXPECT_TRUE(has(e, "invalid identifier '2a'") && has(e, "offset 0")) << e;
  e = errorOf("b * 3x");
  EXPECT_TRUE(has(e, "invalid identifier '3x'") && has(e, "offset 4")) << e;
  e = errorOf("(a + b");
  EXPECT_TRUE(has(e, "offset 6") && has(e, "')'")) << e;
  e = errorOf("a + )");
  EXPECT_TRUE(has(e, "offset 4") && has(e, "')'")) << e;
  e = errorOf("a / b");
  EXPECT_TRUE(has(e, "offset 2") && has(e, "'/'")) << e;
  e = errorOf("a^b");
  EXPECT_TRUE(has(e, "offset 2") && has(e, "exponent")) << e;
  e = errorOf("9223372036854775808");
  EXPECT_TRUE(has(e, "out of the int64 range") && has(e, "offset 0")) << e;
  e = errorOf("a - 9223372036854775808");
  EXPECT_TRUE(has(e, "out of the int64 range") && has(e, "offset 4")) << e;
  e = errorOf("9223372036854775807 + 1");
  EXPECT_TRUE(has(e, "overflow") && has(e, "offset 20")) << e;
  e = errorOf("2^63");
  EXPECT_TRUE(has(e, "overflow")) << e;
  e = errorOf("a\x01");
  EXPECT_TRUE(has(e, "byte 0x01") && has(e, "offset 1")) << e;
  e = errorOf(std::string(1000, '(') + "a" + std::string(1000, ')'));
  EXPECT_TRUE(has(e, "nested deeper")) << e;
  e = errorOf(std::string(1000, '-') + "a");
  EXPECT_TRUE(has(e, "nested deeper")) << e;
  // A product too large to expand is an error, not an exhausted memory.
  std::string big = "(a + b + c + d + e + f + g + h + i + j)";
  e = errorOf(big + "*" + big + "*" + big + "*" + big + "*" + big + "*" + big + "*" + big);
  EXPECT_TRUE(has(e, "too large")) << e;
  // Without an error string a bad text is still just std::nullopt.
  EXPECT_FALSE(SymExpr::parse("a +"));
}

TEST(SymExpr, Int64ExtremesRoundTrip) {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  SymExpr a = sym("a"), b = sym("b");
  for (SymExpr e : {SymExpr(lo), SymExpr(hi), lo * a, hi * a, -hi * a, lo * a + b, b + lo * a,
                    a * b + lo * a + lo, a - hi * b, lo * a * a + hi * b})
    EXPECT_EQ(parsed(e.str()), e) << e.str();
  EXPECT_EQ((lo * a + b).str(), "-9223372036854775808*a + b");
  EXPECT_EQ((b + lo * a * b).str(), "-9223372036854775808*a*b + b");
  EXPECT_EQ((a * b + lo * b).str(), "a*b + -9223372036854775808*b");
}

/// The property that matters most: over random expression trees (2 or 3 symbols, small
/// constants), the canonical form prints to text that parses back to it, and evaluates to what
/// the tree evaluates to directly; its bounds hold the values in the ranges; substitution
/// agrees with evaluation; == agrees with the order and the hash.
TEST(SymExpr, RandomExpressionsRoundTripAndEvaluate) {
  std::mt19937_64 rng(20240611);
  std::vector<SymExpr> all;
  int evaluated = 0, bounded = 0, substituted = 0;
  for (int i = 0; i < 3000; ++i) {
    int numSymbols = 2 + i % 2;
    Tree tree = randomTree(rng, 4, numSymbols);
    SCOPED_TRACE("tree " + treeStr(tree));
    SymExpr e = build(tree);
    all.push_back(e);
    std::string text = e.str();
    SCOPED_TRACE("canonical " + text);
    std::string error;
    std::optional<SymExpr> back = SymExpr::parse(text, &error);
    ASSERT_TRUE(back) << error;
    EXPECT_EQ(*back, e);
    EXPECT_EQ(back->str(), text);
    EXPECT_EQ(back->hash(), e.hash());
    // Parsing the tree's own text gives the same canonical form.
    std::optional<SymExpr> fromTree = SymExpr::parse(treeStr(tree), &error);
    ASSERT_TRUE(fromTree) << error;
    EXPECT_EQ(*fromTree, e);

    for (int k = 0; k < 6; ++k) {
      Binding binding = randomBinding(rng, -6, 9);
      double maxAbs = 0;
      std::optional<int64_t> want = direct(tree, binding, maxAbs);
      if (!want)
        continue; // A division by zero: simplifications may drop it.
      absBound(tree, binding, maxAbs);
      std::optional<int64_t> got = eval(e, binding, &error);
      if (maxAbs < 1e17) {
        ASSERT_TRUE(got) << error << " at a=" << binding["a"] << " b=" << binding["b"]
                         << " c=" << binding["c"];
      }
      if (!got)
        continue;
      ++evaluated;
      EXPECT_EQ(*got, *want) << "at a=" << binding["a"] << " b=" << binding["b"]
                             << " c=" << binding["c"];
    }

    Ranges ranges;
    for (const char *s : kSymbols) {
      int64_t lo = std::uniform_int_distribution<int>(0, 5)(rng);
      ranges[s] = {lo, lo + std::uniform_int_distribution<int>(0, 6)(rng)};
    }
    std::pair<int64_t, int64_t> bounds = e.bounds(rangesOf(ranges));
    for (int k = 0; k < 6; ++k) {
      Binding binding;
      for (auto &[s, r] : ranges)
        binding[s] = std::uniform_int_distribution<int64_t>(r.first, r.second)(rng);
      std::optional<int64_t> got = eval(e, binding);
      if (!got)
        continue;
      ++bounded;
      EXPECT_LE(bounds.first, *got) << "at a=" << binding["a"] << " b=" << binding["b"]
                                    << " c=" << binding["c"];
      EXPECT_GE(bounds.second, *got) << "at a=" << binding["a"] << " b=" << binding["b"]
                                     << " c=" << binding["c"];
    }

    // a := another tree: evaluating the substituted expression is evaluating the tree with a
    // bound to the other tree's value.
    Tree inner = randomTree(rng, 2, numSymbols);
    SymExpr substitutedExpr = e.substitute({{"a", build(inner)}});
    for (int k = 0; k < 3; ++k) {
      Binding binding = randomBinding(rng, -6, 9);
      double unused = 0;
      std::optional<int64_t> innerValue = direct(inner, binding, unused);
      if (!innerValue)
        continue;
      Binding outer = binding;
      outer["a"] = *innerValue;
      std::optional<int64_t> want = direct(tree, outer, unused);
      std::optional<int64_t> got = eval(substitutedExpr, binding);
      if (!want || !got)
        continue;
      ++substituted;
      EXPECT_EQ(*got, *want) << "a := " << treeStr(inner) << " at a=" << binding["a"]
                             << " b=" << binding["b"] << " c=" << binding["c"];
    }
  }
  // Enough of the checks ran to mean something.
  EXPECT_GT(evaluated, 8000);
  EXPECT_GT(bounded, 8000);
  EXPECT_GT(substituted, 3000);

  size_t distinct = std::set<SymExpr>(all.begin(), all.end()).size();
  EXPECT_EQ(distinct, std::unordered_set<SymExpr>(all.begin(), all.end()).size());
  EXPECT_GT(distinct, 1000u);
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    const SymExpr &x = all[i], &y = all[i + 1];
    EXPECT_EQ((int)(x < y) + (int)(y < x) + (int)(x == y), 1) << x.str() << " vs " << y.str();
    if (x == y) {
      EXPECT_EQ(x.hash(), y.hash());
    }
  }
}

// ---- Simplifications ------------------------------------------------------------------------

TEST(SymExpr, ExactDivision) {
  SymExpr a = sym("a"), b = sym("b"), batch = sym("batch"), seq = sym("seq");
  auto q = SymExpr::divideExactly(batch * seq * 768, seq * 768);
  ASSERT_TRUE(q);
  EXPECT_EQ(*q, batch);
  EXPECT_EQ(SymExpr::divideExactly(2 * a + 4, 2), a + 2);
  EXPECT_EQ(SymExpr::divideExactly(2 * a + 4, -2), -a - 2);
  EXPECT_EQ(SymExpr::divideExactly(a, b), std::nullopt);
  EXPECT_EQ(SymExpr::divideExactly(2 * a + 3, 2), std::nullopt);
  EXPECT_EQ(SymExpr::divideExactly(a, 0), std::nullopt);
  EXPECT_EQ(SymExpr::divideExactly(0, 0), std::nullopt);
  EXPECT_EQ(SymExpr::divideExactly(0, a + 1), SymExpr(0));
  EXPECT_EQ(SymExpr::divideExactly(a * a * b + a * b, a * b), a + 1);
  EXPECT_EQ(SymExpr::divideExactly(a + 1, a), std::nullopt);
  EXPECT_EQ(SymExpr::divideExactly(a, a * a), std::nullopt);
  EXPECT_EQ(SymExpr::divideExactly(3 * (a + b), a + b), SymExpr(3));
  EXPECT_EQ(SymExpr::divideExactly((a + b) * (a - b + 3), a + b), a - b + 3);
  EXPECT_EQ(SymExpr::divideExactly((a + 1) * (a + 1), a + 2), std::nullopt);
  EXPECT_EQ(SymExpr::divideExactly(6 * a + 4, 2 * a + 2), std::nullopt);
  SymExpr fd = SymExpr::floorDiv(a, 3);
  EXPECT_EQ(SymExpr::divideExactly(fd * b + fd, fd), b + 1);
  // The quotient of an int64 extreme by -1 does not fit: no exact division.
  EXPECT_EQ(SymExpr::divideExactly(std::numeric_limits<int64_t>::min() * a, -1), std::nullopt);

  // floordiv, ceildiv and mod simplify exact division.
  EXPECT_EQ(SymExpr::floorDiv(batch * seq * 768, seq * 768), batch);
  EXPECT_EQ(SymExpr::ceilDiv(batch * seq * 768, seq * 768), batch);
  EXPECT_EQ(SymExpr::mod(batch * seq * 768, seq * 768), SymExpr(0));
  EXPECT_EQ(SymExpr::floorDiv(2 * a + 4, 2), a + 2);
  EXPECT_EQ(SymExpr::floorDiv(a, 1), a);
  EXPECT_EQ(SymExpr::ceilDiv(a, 1), a);
  EXPECT_EQ(SymExpr::mod(a, 1), SymExpr(0));
  EXPECT_EQ(SymExpr::mod(a, -1), SymExpr(0));
  EXPECT_EQ(SymExpr::floorDiv(a, a), SymExpr(1));
  EXPECT_EQ(SymExpr::floorDiv(0, a), SymExpr(0));
  // Not exact: multiples of the divisor pulled out, the rest opaque.
  EXPECT_EQ(SymExpr::floorDiv(2 * a + 3, 2).str(), "a + 1");
  EXPECT_EQ(SymExpr::floorDiv(a + b, 2).str(), "floordiv(a + b, 2)");
  EXPECT_EQ(SymExpr::mod(a, b).str(), "mod(a, b)");
  EXPECT_EQ(SymExpr::ceilDiv(a, 2).str(), "ceildiv(a, 2)");
}

TEST(SymExpr, DivisionConstantFoldingMatchesPython) {
  EXPECT_EQ(SymExpr::floorDiv(-7, 2), SymExpr(-4));
  EXPECT_EQ(SymExpr::mod(-7, 2), SymExpr(1));
  EXPECT_EQ(SymExpr::ceilDiv(7, 2), SymExpr(4));
  EXPECT_EQ(SymExpr::ceilDiv(-7, 2), SymExpr(-3));
  EXPECT_EQ(SymExpr::floorDiv(7, -2), SymExpr(-4));
  EXPECT_EQ(SymExpr::mod(7, -2), SymExpr(-1));
  EXPECT_EQ(SymExpr::mod(-7, -2), SymExpr(-1));
  for (int64_t x = -20; x <= 20; ++x)
    for (int64_t y = -7; y <= 7; ++y) {
      if (y == 0)
        continue;
      EXPECT_EQ(SymExpr::floorDiv(x, y), SymExpr(refFloorDiv(x, y))) << x << " // " << y;
      EXPECT_EQ(SymExpr::ceilDiv(x, y), SymExpr(refCeilDiv(x, y))) << x << " ceil/ " << y;
      EXPECT_EQ(SymExpr::mod(x, y), SymExpr(refMod(x, y))) << x << " % " << y;
      // And evaluation of the opaque nodes agrees.
      SymExpr s = sym("s");
      Binding b{{"s", x}};
      EXPECT_EQ(eval(SymExpr::floorDiv(s, y), b), refFloorDiv(x, y)) << x << " // " << y;
      EXPECT_EQ(eval(SymExpr::ceilDiv(s, y), b), refCeilDiv(x, y)) << x << " ceil/ " << y;
      EXPECT_EQ(eval(SymExpr::mod(s, y), b), refMod(x, y)) << x << " % " << y;
    }
  const int64_t lo = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(SymExpr::mod(lo, -1), SymExpr(0));
  EXPECT_THROW(SymExpr::floorDiv(lo, -1), std::overflow_error);
  EXPECT_THROW(SymExpr::ceilDiv(lo, -1), std::overflow_error);
}

TEST(SymExpr, DivisionByConstantZeroWaitsForEvaluation) {
  SymExpr a = sym("a");
  SymExpr fd = SymExpr::floorDiv(7, 0), cd = SymExpr::ceilDiv(a, 0), m = SymExpr::mod(a, 0);
  EXPECT_FALSE(fd.isConstant());
  EXPECT_EQ(fd.str(), "floordiv(7, 0)");
  EXPECT_EQ(parsed(fd.str()), fd);
  std::string error;
  EXPECT_EQ(eval(fd, {}, &error), std::nullopt);
  EXPECT_NE(error.find("division by zero"), std::string::npos) << error;
  EXPECT_EQ(eval(cd, {{"a", 3}}, &error), std::nullopt);
  EXPECT_NE(error.find("division by zero in ceildiv(a, 0)"), std::string::npos) << error;
  EXPECT_EQ(eval(m, {{"a", 3}}, &error), std::nullopt);
  EXPECT_NE(error.find("modulo by zero in mod(a, 0)"), std::string::npos) << error;
  EXPECT_EQ(eval(SymExpr::floorDiv(a, a - 3), {{"a", 3}}, &error), std::nullopt);
  EXPECT_NE(error.find("division by zero"), std::string::npos) << error;
}

TEST(SymExpr, MaxMin) {
  SymExpr a = sym("a"), b = sym("b");
  EXPECT_EQ(SymExpr::max(3, 5), SymExpr(5));
  EXPECT_EQ(SymExpr::min(3, 5), SymExpr(3));
  EXPECT_EQ(SymExpr::max(-3, -5), SymExpr(-3));
  EXPECT_EQ(SymExpr::max(a, a), a);
  EXPECT_EQ(SymExpr::min(a * b, b * a), a * b);
  EXPECT_EQ(SymExpr::max(a + 1, a), a + 1);
  EXPECT_EQ(SymExpr::max(a, a + 1), a + 1);
  EXPECT_EQ(SymExpr::min(a + 1, a), a);
  EXPECT_EQ(SymExpr::min(a - 2, a + 3), a - 2);
  EXPECT_EQ(SymExpr::max(a, b), SymExpr::max(b, a));
  EXPECT_EQ(SymExpr::min(a, b + 1), SymExpr::min(b + 1, a));
  EXPECT_NE(SymExpr::max(a, b), SymExpr::min(a, b));
  EXPECT_EQ(SymExpr::max(b, a).str(), "max(a, b)");
  EXPECT_EQ(SymExpr::max(a, 4).str(), "max(a, 4)");
  EXPECT_EQ(SymExpr::min(4, a).str(), "min(a, 4)");
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(SymExpr::max(lo, hi), SymExpr(hi));
  EXPECT_EQ(SymExpr::min(lo, hi), SymExpr(lo));
  // a - b overflows: no simplification, no exception.
  SymExpr m = SymExpr::max(hi * a, -2 * a);
  EXPECT_FALSE(m.isConstant());
  EXPECT_EQ(eval(m, {{"a", 0}}), 0);
}

TEST(SymExpr, ConstructionOverflowThrows) {
  const int64_t hi = std::numeric_limits<int64_t>::max(), lo = std::numeric_limits<int64_t>::min();
  SymExpr a = sym("a");
  EXPECT_THROW(SymExpr(hi) + 1, std::overflow_error);
  EXPECT_THROW(SymExpr(lo) - 1, std::overflow_error);
  EXPECT_THROW(-SymExpr(lo), std::overflow_error);
  EXPECT_THROW(hi * a + hi * a, std::overflow_error);
  EXPECT_THROW(SymExpr(1LL << 32) * (1LL << 31), std::overflow_error);
  EXPECT_THROW((2 * a + 1) * (hi * a), std::overflow_error);
  try {
    (void)(SymExpr(hi) + 1);
  } catch (const std::overflow_error &e) {
    EXPECT_NE(std::string(e.what()).find("9223372036854775807 + 1"), std::string::npos)
        << e.what();
  }
  // Sums that leave and come back into range are fine where they are computed at once.
  EXPECT_EQ(hi * a - hi * a, SymExpr());
  EXPECT_EQ(lo * a - lo * a, SymExpr());
  EXPECT_EQ((a + 1) * (a - 1), a * a - 1);
}

// ---- Evaluation and bounds ------------------------------------------------------------------

TEST(SymExpr, Evaluate) {
  SymExpr batch = sym("batch"), seq = sym("seq");
  SymExpr e = batch * seq * 768 + SymExpr::floorDiv(seq + 1, 2) - SymExpr::max(seq, 4);
  EXPECT_EQ(eval(e, {{"batch", 2}, {"seq", 7}}), 2 * 7 * 768 + 4 - 7);
  EXPECT_EQ(eval(e, {{"batch", 0}, {"seq", 1}}), 0 + 1 - 4);
  EXPECT_EQ(eval(SymExpr(-3), {}), -3);
  EXPECT_EQ(eval(SymExpr(), {}), 0);
  EXPECT_EQ(eval(SymExpr::mod(seq, 3) * SymExpr::min(batch, 2), {{"batch", 5}, {"seq", -4}}), 4);
}

TEST(SymExpr, EvaluateErrors) {
  SymExpr a = sym("a"), b = sym("b"), seq = sym("seq");
  std::string error;
  EXPECT_EQ(eval(a * seq + 1, {{"a", 2}}, &error), std::nullopt);
  EXPECT_NE(error.find("unbound symbol 'seq'"), std::string::npos) << error;
  error.clear();
  EXPECT_EQ(eval(SymExpr::max(a, seq), {{"a", 2}}, &error), std::nullopt);
  EXPECT_NE(error.find("'seq'"), std::string::npos) << error;
  // An unbound symbol is an error even where another factor is 0.
  EXPECT_EQ(eval(a * seq, {{"a", 0}}, &error), std::nullopt);

  EXPECT_EQ(eval(SymExpr::floorDiv(a, b), {{"a", 2}, {"b", 0}}, &error), std::nullopt);
  EXPECT_NE(error.find("division by zero in floordiv(a, b)"), std::string::npos) << error;
  EXPECT_EQ(eval(SymExpr::mod(a, b), {{"a", 2}, {"b", 0}}, &error), std::nullopt);
  EXPECT_NE(error.find("modulo by zero"), std::string::npos) << error;

  SymExpr a4 = a * a * a * a;
  EXPECT_EQ(eval(a4, {{"a", 1000000}}, &error), std::nullopt);
  EXPECT_NE(error.find("overflow"), std::string::npos) << error;
  EXPECT_NE(error.find("a^4"), std::string::npos) << error;
  EXPECT_EQ(eval(a4, {{"a", 10000}}), 10000000000000000LL);
  EXPECT_EQ(eval(a4, {{"a", -10000}}), 10000000000000000LL);
  EXPECT_EQ(eval(a * b, {{"a", 1LL << 32}, {"b", 1LL << 31}}, &error), std::nullopt);
  EXPECT_NE(error.find("overflow"), std::string::npos) << error;
  EXPECT_EQ(eval(a + b, {{"a", std::numeric_limits<int64_t>::max()}, {"b", 1}}, &error),
            std::nullopt);
  EXPECT_NE(error.find("overflow"), std::string::npos) << error;
  EXPECT_EQ(eval(-a, {{"a", std::numeric_limits<int64_t>::min()}}, &error), std::nullopt);
  EXPECT_NE(error.find("overflow"), std::string::npos) << error;
  EXPECT_EQ(eval(SymExpr::floorDiv(a, b), {{"a", std::numeric_limits<int64_t>::min()}, {"b", -1}},
                 &error),
            std::nullopt);
  EXPECT_NE(error.find("overflow"), std::string::npos) << error;
  // Terms that overflow only on the way to an in-range sum are fine; a zero factor makes its
  // term 0 however large the others are.
  const int64_t hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(eval(a + b - 2, {{"a", hi}, {"b", 1}}), hi - 1);
  EXPECT_EQ(eval(a * a * a * a * b, {{"a", 1000000}, {"b", 0}}), 0);
  EXPECT_EQ(eval(a * a * a * a * a * a * a * a, {{"a", -1}}), 1);
  EXPECT_EQ(eval(parsed("a^1000000000000"), {{"a", -1}}), 1);
}

TEST(SymExpr, Bounds) {
  SymExpr a = sym("a"), b = sym("b");
  Ranges r{{"a", {1, 8}}, {"b", {2, 4}}};
  auto bounds = [&](const SymExpr &e) { return e.bounds(rangesOf(r)); };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(bounds(a * b + 1), P(3, 33));
  EXPECT_EQ(bounds(SymExpr::floorDiv(a, 2)), P(0, 4));
  EXPECT_EQ(bounds(SymExpr::ceilDiv(a, 2)), P(1, 4));
  EXPECT_EQ(bounds(a - b), P(-3, 6));
  EXPECT_EQ(bounds(SymExpr(7)), P(7, 7));
  EXPECT_EQ(bounds(a * a - 1), P(0, 63));
  EXPECT_EQ(bounds(SymExpr::max(a, b)), P(2, 8));
  EXPECT_EQ(bounds(SymExpr::min(a, b)), P(1, 4));
  EXPECT_EQ(bounds(SymExpr::mod(a, b)), P(0, 3));
  EXPECT_EQ(bounds(SymExpr::mod(a, 16)), P(1, 8));
  EXPECT_EQ(bounds(SymExpr::mod(a + 8, 8)), P(0, 7));
  EXPECT_EQ(bounds(SymExpr::floorDiv(a, b)), P(0, 4));
  EXPECT_EQ(bounds(SymExpr::floorDiv(-a, 2)), P(-4, -1));
  // An unknown symbol is in [0, INT64_MAX]; overflow saturates.
  const int64_t hi = std::numeric_limits<int64_t>::max(), lo = std::numeric_limits<int64_t>::min();
  SymExpr n = sym("n");
  EXPECT_EQ(bounds(n + 1), P(1, hi));
  EXPECT_EQ(bounds(-n), P(-hi, 0));
  EXPECT_EQ(bounds(n * n), P(0, hi));
  EXPECT_EQ(bounds(-3 * n * n), P(lo, 0));
  EXPECT_EQ(bounds(SymExpr::floorDiv(n, 2)), P(0, hi / 2));
  // A divisor's range that holds 0 leaves out the 0.
  Ranges withZero{{"a", {-5, 10}}, {"b", {0, 3}}};
  EXPECT_EQ(SymExpr::floorDiv(a, b).bounds(rangesOf(withZero)), P(-5, 10));
  EXPECT_EQ(SymExpr::mod(a, b).bounds(rangesOf(withZero)), P(0, 2));
  Ranges zeroOnly{{"b", {0, 0}}};
  EXPECT_EQ(SymExpr::floorDiv(7, b).bounds(rangesOf(zeroOnly)), P(lo, hi));
  // Negative ranges (not dims, but handled): even powers are not negative.
  Ranges negative{{"a", {-3, 2}}};
  EXPECT_EQ((a * a).bounds(rangesOf(negative)), P(0, 9));
  EXPECT_EQ((a * a * a).bounds(rangesOf(negative)), P(-27, 8));
}

TEST(SymExpr, SymbolsAndSubstitute) {
  SymExpr a = sym("a"), b = sym("b"), seq = sym("seq");
  EXPECT_EQ((seq * a + SymExpr::floorDiv(b, 2) + SymExpr::max(sym("z"), a)).symbols(),
            (std::vector<std::string>{"a", "b", "seq", "z"}));
  EXPECT_TRUE(SymExpr(3).symbols().empty());
  EXPECT_EQ((a * a * a).symbols(), std::vector<std::string>{"a"});

  SymExpr e = a * b + SymExpr::floorDiv(a + 1, 2);
  EXPECT_EQ(e.substitute({{"a", 4}}), 4 * b + 2);
  EXPECT_EQ(e.substitute({{"a", 2 * seq - 1}}), 2 * seq * b - b + seq);
  EXPECT_EQ(e.substitute({}), e);
  EXPECT_EQ(e.substitute({{"unused", 9}}), e);
  EXPECT_EQ(e.substitute({{"a", b}, {"b", a}}), a * b + SymExpr::floorDiv(b + 1, 2));
  EXPECT_EQ(SymExpr::max(a, b).substitute({{"b", a + 2}}), a + 2);
  EXPECT_EQ((a * a).substitute({{"a", b + 1}}), b * b + 2 * b + 1);
  EXPECT_EQ(SymExpr::mod(a, b).substitute({{"b", 0}}).str(), "mod(a, 0)");
  EXPECT_THROW((a * a).substitute({{"a", SymExpr(1LL << 32)}}), std::overflow_error);
}

TEST(SymExpr, OrderAndHashMakeMapKeys) {
  SymExpr a = sym("a"), b = sym("b");
  std::map<SymExpr, int> m;
  m[a * b] = 1;
  m[b * a] += 1;
  m[a + b] = 3;
  m[SymExpr::max(a, b)] = 4;
  m[SymExpr::max(b, a)] += 1;
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m[a * b], 2);
  EXPECT_EQ(m[SymExpr::max(a, b)], 5);
  std::unordered_set<SymExpr> s{a * b, b * a, a + b, b + a, SymExpr(1), SymExpr(0)};
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(std::hash<SymExpr>()(a * b), (b * a).hash());
  EXPECT_NE((a * b).hash(), (a + b).hash());
  EXPECT_FALSE(a < a);
  EXPECT_TRUE((a < b) != (b < a));
}

TEST(SymExpr, DivisionByAConstantPullsOutItsMultiples) {
  SymExpr h = SymExpr::symbol("h"), w = SymExpr::symbol("w");
  // A 2x2 stride-2 pool of h: floordiv(h - 2, 2) + 1 is floordiv(h, 2).
  EXPECT_EQ(SymExpr::floorDiv(h - 2, 2) + 1, SymExpr::floorDiv(h, 2));
  EXPECT_EQ(SymExpr::floorDiv(4 * w + h + 6, 2).str(), SymExpr::parse("2*w + 3 + floordiv(h, 2)")->str());
  EXPECT_EQ(SymExpr::ceilDiv(h + 3, 3), SymExpr::ceilDiv(h, 3) + 1);
  EXPECT_EQ(SymExpr::mod(h + 4, 2), SymExpr::mod(h, 2));
  // Negative divisors keep floor semantics: floordiv(h - 3, -3) = floordiv(h, -3) + 1.
  EXPECT_EQ(SymExpr::floorDiv(h - 3, -3), SymExpr::floorDiv(h, -3) + 1);
  for (int64_t v = -9; v <= 9; ++v) {
    auto at = [&](const SymExpr &e) {
      return *e.evaluate([&](const std::string &) -> std::optional<int64_t> { return v; });
    };
    EXPECT_EQ(at(SymExpr::floorDiv(h - 3, -3)), (int64_t)std::floor((v - 3) / -3.0)) << v;
    EXPECT_EQ(at(SymExpr::ceilDiv(h + 3, 3)), (int64_t)std::ceil((v + 3) / 3.0)) << v;
  }
}
