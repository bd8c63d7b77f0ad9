// Tests of flatten_against.h: FlattenSpec over Trees, std containers and user
// types, the leaf order the spec gives, and the key path of every mismatch.
#include "cpytree/flatten_against.h"

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace specdemo {
struct Pt {
  int x, y;
};
struct Named {
  int a, b;
};
}  // namespace specdemo

template <>
struct cpytree::NodeTraits<specdemo::Pt> {
  static constexpr NodeKind kKind = NodeKind::kCustom;
  using Children = std::tuple<int, int>;
  static std::string TypeName() { return "demo.Pt"; }
  static Value Context(const specdemo::Pt&) { return "null"; }
  template <class F>
  static void Visit(const specdemo::Pt& p, F&& f) {
    f(p.x);
    f(p.y);
  }
};

template <>
struct cpytree::NodeTraits<specdemo::Named> {
  static constexpr NodeKind kKind = NodeKind::kNamedTuple;
  using Children = std::tuple<int, int>;
  static std::string TypeName() { return "demo.Named"; }
  template <class F>
  static void Visit(const specdemo::Named& n, F&& f) {
    f(n.a);
    f(n.b);
  }
};

namespace cpytree {
namespace {

using T = Tree<int>;
using S = TreeSpec;

template <class L = int, class X>
std::string Error(const TreeSpec& spec, const X& x) {
  try {
    FlattenSpec<L>(spec, x);
  } catch (const StructureError& e) {
    return e.what();
  }
  return "no error";
}

TEST(FlattenSpecTest, TreeLeavesComeInSpecOrder) {
  S spec = S::Dict({"b", "a"}, {S::List({S::Leaf(), S::Leaf()}), S::Leaf()});
  // The Tree's dict has the other key order: children are matched by key.
  T t = T::Dict({{"a", 3}, {"b", T::List({1, 2})}});
  EXPECT_EQ(FlattenSpec<int>(spec, t), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(FlattenSpec<long>(S::Leaf(), T(7)), (std::vector<long>{7}));
}

TEST(FlattenSpecTest, StaticTypesMatchTheSpec) {
  S spec = S::Tuple({S::Dict({"x", "y"}, {S::Leaf(), S::List({S::Leaf(), S::Leaf()})}),
                     S::Custom("demo.Pt", "null", {S::Leaf(), S::Leaf()}),
                     S::NamedTuple("demo.Named", {S::Leaf(), S::Leaf()})});
  std::map<std::string, std::vector<int>> m = {{"x", {1}}, {"y", {2, 3}}};
  // std::map visits x, y; the spec wants x a leaf, so use a Tree for it.
  std::tuple<std::map<std::string, Tree<int>>, specdemo::Pt, specdemo::Named> v{
      {{"y", T::List({2, 3})}, {"x", 1}}, {4, 5}, {6, 7}};
  EXPECT_EQ(FlattenSpec<int>(spec, v), (std::vector<int>{1, 2, 3, 4, 5, 6, 7}));
  // A std::vector matches a tuple or a list node.
  EXPECT_EQ(FlattenSpec<int>(S::Tuple({S::Leaf(), S::Leaf()}), std::vector<int>{8, 9}),
            (std::vector<int>{8, 9}));
}

TEST(FlattenSpecTest, EmptyOptionalIsANoneLeaf) {
  S spec = S::List({S::Leaf(), S::Leaf()});
  std::vector<std::optional<int>> v = {1, std::nullopt};
  EXPECT_EQ(FlattenSpec<std::optional<int>>(spec, v),
            (std::vector<std::optional<int>>{1, std::nullopt}));
  EXPECT_EQ(Error<std::optional<int>>(S::List({S::List({})}),
                                      std::vector<std::optional<std::vector<int>>>{{{}}}),
            "no error");
}

TEST(FlattenSpecTest, ManyDictKeysUseTheHeapPath) {
  std::vector<Value> keys;
  std::vector<S> kids;
  std::map<std::string, int> m;
  for (int k = 0; k < 40; ++k) {
    std::string key = "k" + std::to_string(100 + k);
    keys.push_back(key);
    kids.push_back(S::Leaf());
    m[key] = k;
  }
  std::vector<int> want(40);
  for (int k = 0; k < 40; ++k) want[k] = k;
  EXPECT_EQ(FlattenSpec<int>(S::Dict(keys, kids), m), want);
}

TEST(FlattenSpecTest, MismatchesNameTheKeyPath) {
  S spec = S::Dict({"a", "b"}, {S::List({S::Leaf(), S::Leaf()}), S::Tuple({S::Leaf()})});
  EXPECT_EQ(Error(spec, T::Dict({{"a", T::List({1, 2, 3})}, {"b", T::Tuple({4})}})),
            "the spec has a list node with 2 children, the value has 3 (at key path tree['a'])");
  EXPECT_EQ(Error(spec, T::Dict({{"a", T::List({1, 2})}, {"b", T::List({4})}})),
            "the spec has a tuple node, the value is a list node (at key path tree['b'])");
  EXPECT_EQ(Error(spec, T::Dict({{"a", T::List({1, 2})}, {"c", T::Tuple({4})}})),
            "the value has the key 'c', which is not among the spec's keys ['a', 'b'] "
            "(at key path tree)");
  EXPECT_EQ(Error(spec, T::Dict({{"a", T::List({1, T::List({2})})}, {"b", T::Tuple({4})}})),
            "the spec has a leaf, the value is a list node (at key path tree['a'][1])");
  EXPECT_EQ(Error(spec, T(1)), "the value is a leaf, the spec has a dict node (at key path tree)");
  std::map<std::string, std::vector<int>> m = {{"a", {1, 2}}, {"b", {3}}};
  EXPECT_EQ(FlattenSpec<int>(spec, m), (std::vector<int>{1, 2, 3}));  // a vector takes a tuple
  std::map<std::string, std::optional<std::vector<int>>> none = {{"a", std::nullopt}, {"b", {{3}}}};
  EXPECT_EQ(Error<std::optional<int>>(spec, none),
            "the value is None, the spec has a list node (at key path tree['a'])");
}

TEST(FlattenSpecTest, UserTypesCheckNameAndContext) {
  S pt = S::Custom("demo.Pt", "null", {S::Leaf(), S::Leaf()});
  EXPECT_EQ(FlattenSpec<int>(pt, specdemo::Pt{1, 2}), (std::vector<int>{1, 2}));
  EXPECT_EQ(Error(S::Custom("demo.Other", "null", {S::Leaf(), S::Leaf()}), specdemo::Pt{1, 2}),
            "the spec has a custom node 'demo.Other', the value is a custom node 'demo.Pt' "
            "(at key path tree)");
  EXPECT_EQ(Error(S::Custom("demo.Pt", "[1]", {S::Leaf(), S::Leaf()}), specdemo::Pt{1, 2}),
            "the spec has a custom node 'demo.Pt' with context '[1]', the value's is 'null' "
            "(at key path tree)");
  EXPECT_EQ(Error(S::List({S::NamedTuple("demo.Named", {S::Leaf()})}),
                  std::vector<specdemo::Named>{{1, 2}}),
            "the spec has a namedtuple node 'demo.Named' with 1 children, the value has 2 "
            "(at key path tree[0])");
  T t = T::Custom("demo.Pt", "[2]", {1, 2});
  EXPECT_EQ(Error(pt, t),
            "the spec has a custom node 'demo.Pt' with context 'null', the value's is '[2]' "
            "(at key path tree)");
}

}  // namespace
}  // namespace cpytree
