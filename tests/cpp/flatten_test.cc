// Tests of flatten.h over dynamic Tree<T>s, std containers and user types:
// the specs match Python's, round trips, Map, and where Unflatten fails.
#include "cpytree/flatten.h"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cpytree/json.h"
#include "gtest/gtest.h"

namespace mylib {
struct Point {
  float x, y;
  bool operator==(const Point& o) const { return x == o.x && y == o.y; }
};
// A deque-like user type with a maxlen.
struct Ring {
  std::vector<int> items;
  bool operator==(const Ring& o) const { return items == o.items; }
};
}  // namespace mylib

template <>
struct cpytree::NodeTraits<mylib::Point> {
  static constexpr NodeKind kKind = NodeKind::kCustom;
  using Children = std::tuple<float, float>;
  static std::string TypeName() { return "mylib.Point"; }
  static Value Context(const mylib::Point&) { return "null"; }
  template <class F>
  static void Visit(const mylib::Point& p, F&& f) {
    f(p.x);
    f(p.y);
  }
  template <class B>
  static mylib::Point Build(B& b) {
    mylib::Point p{};
    b.NextInto(p.x);
    b.NextInto(p.y);
    return p;
  }
};

template <>
struct cpytree::NodeTraits<mylib::Ring> {
  static constexpr NodeKind kKind = NodeKind::kDeque;
  using Children = std::tuple<int>;
  static std::optional<std::int64_t> MaxLen(const mylib::Ring&) { return 8; }
  template <class F>
  static void Visit(const mylib::Ring& r, F&& f) {
    for (int i : r.items) f(i);
  }
  template <class B>
  static mylib::Ring Build(B& b) {
    mylib::Ring r;
    for (std::size_t k = 0; k < b.size(); ++k) r.items.push_back(b.template Next<int>());
    return r;
  }
};

namespace cpytree {
namespace {

using T = Tree<int>;
TreeSpec L() { return TreeSpec::Leaf(); }

T Sample() {
  return T::Tuple({T::List({1, 2}), T::Dict({{"a", 3}, {7, T::Tuple({})}}), 4});
}

TEST(TreeTest, AccessAndText) {
  T t = Sample();
  EXPECT_EQ(t.kind(), NodeKind::kTuple);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0][1].leaf(), 2);
  EXPECT_EQ(t[1].at("a").leaf(), 3);
  EXPECT_EQ(t[1].at(7.0).kind(), NodeKind::kTuple);  // Python ==: 7 == 7.0
  EXPECT_FALSE(t[1].Find("zz").has_value());
  EXPECT_THROW(t[1].at("zz"), Error);
  EXPECT_THROW(t.leaf(), Error);
  EXPECT_THROW(t[5], std::out_of_range);
  EXPECT_EQ(t.ToString(), "([1, 2], {'a': 3, 7: ()}, 4)");
  EXPECT_EQ(T::Tuple({1}).ToString(), "(1,)");
  EXPECT_EQ(T::OrderedDict({{"b", 1}}).ToString(), "OrderedDict([('b', 1)])");
  EXPECT_EQ(T::OrderedDict({}).ToString(), "OrderedDict()");
  EXPECT_EQ(T::DefaultDict({"builtins", "list"}, {{"k", 1}}).ToString(),
            "defaultdict(<class 'list'>, {'k': 1})");
  EXPECT_EQ(T::Deque({1, 2}, 3).ToString(), "deque([1, 2], maxlen=3)");
  EXPECT_EQ(T::Deque({}).ToString(), "deque([])");
  EXPECT_EQ(T::NamedTuple("m.P", {1, 2}).ToString(), "P(1, 2)");
  EXPECT_EQ(Tree<double>::List({1.0, 0.5}).ToString(), "[1.0, 0.5]");
  EXPECT_EQ(t.ToString([](int v) { return "<" + std::to_string(v) + ">"; }),
            "([<1>, <2>], {'a': <3>, 7: ()}, <4>)");
}

TEST(FlattenTreeTest, SpecMatchesPython) {
  auto [leaves, spec] = Flatten(Sample());
  EXPECT_EQ(leaves, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(spec, TreeSpec::Tuple({TreeSpec::List({L(), L()}),
                                   TreeSpec::Dict({"a", 7}, {L(), TreeSpec::Tuple({})}), L()}));
  // Python: treespec_dumps(tree_structure(([1, 2], {'a': 3, 7: ()}, 4)))
  EXPECT_EQ(Dumps(spec),
            R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.list", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", "context": "[\"a\", 7]", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": "builtins.tuple", "context": "null", "children_spec": []}]}, {"type": null, "context": null, "children_spec": []}]}])");
  EXPECT_TRUE(internal::IsWellFormed(spec.raw_nodes(), spec.num_nodes()));
}

TEST(FlattenTreeTest, RoundTripEveryKind) {
  T t = T::List({
      T::NamedTuple("m.P", {1, T::Tuple({2})}),
      T::OrderedDict({{"z", 3}, {"a", T::List({})}}),
      T::DefaultDict({"builtins", "int"}, {{1, 4}}),
      T::Deque({5, 6}, 2),
      T::Custom("m.C", "[\"ctx\"]", {7, T::Dict({})}),
      8,
  });
  auto [leaves, spec] = Flatten(t);
  EXPECT_EQ(leaves, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(spec.num_nodes(), 17);
  T back = Unflatten(spec, leaves);
  EXPECT_EQ(back.ToString(), t.ToString());
  EXPECT_EQ(Structure(back), spec);
  EXPECT_EQ(Loads(Dumps(spec)), spec);
  EXPECT_EQ(Structure(t), spec);
  EXPECT_EQ(Leaves(t), leaves);
}

TEST(FlattenTreeTest, LeafAndEmptyTrees) {
  auto [leaves, spec] = Flatten(T(5));
  EXPECT_EQ(spec, L());
  EXPECT_EQ(leaves, std::vector<int>{5});
  EXPECT_EQ(Unflatten(spec, leaves).leaf(), 5);
  auto empty = Flatten(T::Tuple({}));
  EXPECT_TRUE(empty.leaves.empty());
  EXPECT_EQ(Unflatten(empty.spec, std::vector<int>{}).kind(), NodeKind::kTuple);
}

TEST(FlattenTreeTest, SameStructureReusesTheLastSpec) {
  using T = Tree<int>;
  T a = T::Dict({{"w", T::List({1, 2})}, {1, 3}});
  auto first = Flatten(a);
  EXPECT_EQ(first.spec.raw_items(), a.spec().raw_items());  // a Tree's own spec, not a copy
  auto again = Flatten(T::Dict({{"w", T::List({7, 8})}, {1, 9}}));
  EXPECT_EQ(again.spec, first.spec);
  // Static C++ values of one structure share the spec made last.
  std::map<std::string, std::vector<int>> m1 = {{"w", {1, 2}}}, m2 = {{"w", {7, 8}}};
  auto s1 = Flatten(m1);
  auto s2 = Flatten(m2);
  EXPECT_EQ(s2.spec.raw_items(), s1.spec.raw_items());  // shared, not copied
  EXPECT_EQ(again.leaves, (std::vector<int>{7, 8, 9}));
  // Equal but not identical keys (1.0 == 1) get their own spec, as in Python.
  auto as_float = Flatten(T::Dict({{"w", T::List({1, 2})}, {1.0, 3}}));
  EXPECT_NE(as_float.spec.raw_items(), first.spec.raw_items());
  EXPECT_EQ(Dumps(as_float.spec), Dumps(Structure(T::Dict({{"w", T::List({0, 0})}, {1.0, 0}}))));
  EXPECT_TRUE(as_float.spec.child(1).is_leaf());
  EXPECT_EQ(Unflatten(as_float.spec, as_float.leaves).ToString(), "{'w': [1, 2], 1.0: 3}");
  // A structure that differs after a matched prefix keeps that prefix.
  auto longer = Flatten(T::Dict({{"w", T::List({1, 2})}, {1, 3}, {"x", 4}}));
  EXPECT_EQ(Unflatten(longer.spec, longer.leaves).ToString(), "{'w': [1, 2], 1: 3, 'x': 4}");
  auto shorter = Flatten(T::Dict({{"w", T::List({1})}}));
  EXPECT_EQ(Unflatten(shorter.spec, shorter.leaves).ToString(), "{'w': [1]}");
  EXPECT_EQ(Structure(a), first.spec);
}

TEST(FlattenTreeTest, UnflattenFromLoadedSpec) {
  TreeSpec spec = Loads(Dumps(TreeSpec::Dict({"w", "b"}, {TreeSpec::List({L(), L()}), L()})));
  Tree<std::string> t = Unflatten(spec, std::vector<std::string>{"w0", "w1", "b"});
  EXPECT_EQ(t.at("w")[1].leaf(), "w1");
  EXPECT_EQ(t.ToString(), "{'w': [w0, w1], 'b': b}");
}

TEST(FlattenTreeTest, UnflattenChecksTheLeafCount) {
  TreeSpec spec = TreeSpec::Tuple({L(), L()});
  try {
    Unflatten(spec, std::vector<int>{1, 2, 3});
    FAIL();
  } catch (const StructureError& e) {
    EXPECT_EQ(std::string(e.what()),
              "treespec.unflatten(leaves): `leaves` has length 3 but the spec refers to a pytree "
              "that holds 2 items (TreeSpec(tuple, None, [*,\n  *])).");
  }
  EXPECT_THROW(Unflatten(spec, std::vector<int>{1}), StructureError);
}

TEST(FlattenTreeTest, MapKeepsStructure) {
  T t = Sample();
  Tree<std::string> m = Map([](int v) { return std::to_string(v * 10); }, t);
  EXPECT_EQ(Structure(m), Structure(t));
  EXPECT_EQ(Leaves(m), (std::vector<std::string>{"10", "20", "30", "40"}));
  std::vector<int> order;
  Map([&](int v) { order.push_back(v); return 0; }, t);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
}

TEST(TraitsTest, StdContainersFlattenLikePython) {
  std::map<std::string, std::vector<float>> params = {{"w", {1, 2}}, {"b", {3}}};
  auto [leaves, spec] = Flatten(params);
  EXPECT_EQ(leaves, (std::vector<float>{3, 1, 2}));
  EXPECT_EQ(spec, TreeSpec::Dict({"b", "w"}, {TreeSpec::List({L()}), TreeSpec::List({L(), L()})}));
  EXPECT_EQ((UnflattenAs<std::map<std::string, std::vector<float>>>(spec, leaves)), params);

  std::tuple<int, std::pair<int, int>, std::array<int, 2>> t{1, {2, 3}, {4, 5}};
  auto r = Flatten(t);
  EXPECT_EQ(r.leaves, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(r.spec, TreeSpec::Tuple({L(), TreeSpec::Tuple({L(), L()}), TreeSpec::Tuple({L(), L()})}));
  EXPECT_EQ(UnflattenAs<decltype(t)>(r.spec, r.leaves), t);
}

TEST(TraitsTest, UnorderedMapHasAStableSortedOrder) {
  std::unordered_map<int, int> m;
  for (int k : {9, 3, 7, 1, 5}) m[k] = k * 10;
  auto [leaves, spec] = Flatten(m);
  EXPECT_EQ(leaves, (std::vector<int>{10, 30, 50, 70, 90}));
  EXPECT_EQ(spec.keys(), (std::vector<Value>{1, 3, 5, 7, 9}));
  EXPECT_EQ((UnflattenAs<std::unordered_map<int, int>>(spec, leaves)), m);
}

TEST(TraitsTest, OptionalIsTheSubtreeOrANoneLeaf) {
  std::vector<std::optional<float>> v = {1.f, std::nullopt, 3.f};
  auto [leaves, spec] = Flatten(v);
  EXPECT_EQ(spec, TreeSpec::List({L(), L(), L()}));
  EXPECT_EQ(leaves, v);
  EXPECT_EQ(UnflattenAs<decltype(v)>(spec, leaves), v);

  // float and optional<float> leaves join into optional<float>.
  std::tuple<float, std::optional<std::vector<float>>> t{1.f, std::nullopt};
  auto r = Flatten(t);
  static_assert(std::is_same_v<decltype(r.leaves), std::vector<std::optional<float>>>,
                "mixed float / optional<float> leaves deduce optional<float>");
  EXPECT_EQ(r.spec, TreeSpec::Tuple({L(), L()}));
  EXPECT_EQ(UnflattenAs<decltype(t)>(r.spec, r.leaves), t);
  std::tuple<float, std::optional<std::vector<float>>> full{1.f, std::vector<float>{2.f}};
  auto r2 = Flatten(full);
  EXPECT_EQ(r2.spec, TreeSpec::Tuple({L(), TreeSpec::List({L()})}));
  EXPECT_EQ(UnflattenAs<decltype(full)>(r2.spec, r2.leaves), full);
}

TEST(TraitsTest, NoneLeafIntoAValueTypeIsAnError) {
  std::vector<std::optional<float>> leaves = {std::nullopt};
  try {
    UnflattenAs<std::vector<float>>(TreeSpec::List({L()}), leaves);
    FAIL();
  } catch (const StructureError& e) {
    EXPECT_EQ(e.key_path(), "tree[0]");
  }
}

TEST(TraitsTest, UserTypesViaNodeTraits) {
  std::vector<mylib::Point> pts = {{1, 2}, {3, 4}};
  auto [leaves, spec] = Flatten(pts);
  EXPECT_EQ(leaves, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(spec.child(0), TreeSpec::Custom("mylib.Point", "null", {L(), L()}));
  EXPECT_EQ(spec.child(0).ToString(), "TreeSpec(Point, None, [*,\n  *])");
  EXPECT_EQ(UnflattenAs<std::vector<mylib::Point>>(spec, leaves), pts);

  mylib::Ring ring{{1, 2, 3}};
  auto rr = Flatten(ring);
  EXPECT_EQ(rr.spec, TreeSpec::Deque(8, {L(), L(), L()}));
  EXPECT_EQ(UnflattenAs<mylib::Ring>(rr.spec, rr.leaves), ring);
}

TEST(TraitsTest, FlattenAsConvertsMixedLeaves) {
  std::tuple<int, std::string, std::optional<double>> t{1, "two", std::nullopt};
  auto [leaves, spec] = FlattenAs<Value>(t);
  EXPECT_EQ(leaves, (std::vector<Value>{1, "two", nullptr}));
  EXPECT_EQ(UnflattenAs<decltype(t)>(spec, leaves), t);
}

TEST(TraitsTest, ValueLeavesConvertOrSayWhyNot) {
  TreeSpec spec = TreeSpec::Tuple({L(), L()});
  std::vector<Value> leaves = {1, "x"};
  auto ok = UnflattenAs<std::pair<double, std::string>>(spec, leaves);
  EXPECT_EQ(ok, (std::pair<double, std::string>{1.0, "x"}));
  try {
    UnflattenAs<std::pair<int, int>>(spec, leaves);
    FAIL();
  } catch (const StructureError& e) {
    EXPECT_EQ(std::string(e.what()), "the leaf 'x' is not a int as the C++ type needs (at key path tree[1])");
  }
}

TEST(TraitsTest, DynamicTreesInsideStaticTypes) {
  std::pair<Tree<int>, std::vector<int>> p{T::Dict({{"k", T::List({1, 2})}}), {3}};
  auto [leaves, spec] = Flatten(p);
  EXPECT_EQ(leaves, (std::vector<int>{1, 2, 3}));
  auto back = UnflattenAs<decltype(p)>(spec, leaves);
  EXPECT_EQ(back.first.ToString(), "{'k': [1, 2]}");
  EXPECT_EQ(back.second, std::vector<int>{3});
}

TEST(TraitsTest, SequencesAcceptTupleAndListSpecs) {
  TreeSpec tuple = TreeSpec::Tuple({L(), L()});
  EXPECT_EQ((UnflattenAs<std::vector<int>>(tuple, std::vector<int>{1, 2})), (std::vector<int>{1, 2}));
  EXPECT_EQ((UnflattenAs<std::array<int, 2>>(TreeSpec::List({L(), L()}), std::vector<int>{1, 2})),
            (std::array<int, 2>{1, 2}));
  TreeSpec od = TreeSpec::OrderedDict({"a"}, {L()});
  EXPECT_EQ((UnflattenAs<std::map<std::string, int>>(od, std::vector<int>{1})).at("a"), 1);
}

std::string UnflattenError(const TreeSpec& spec, std::size_t n,
                           void (*f)(const TreeSpec&, std::vector<int>)) {
  try {
    f(spec, std::vector<int>(n, 0));
  } catch (const StructureError& e) {
    return e.what();
  }
  return "no error";
}

TEST(UnflattenErrorsTest, ReportWhereTheyFail) {
  using M = std::map<std::string, std::vector<int>>;
  auto as_map = [](const TreeSpec& s, std::vector<int> l) { UnflattenAs<M>(s, std::move(l)); };
  TreeSpec nested = TreeSpec::Dict({"a", "b"}, {TreeSpec::List({L()}), TreeSpec::List({TreeSpec::Tuple({})})});
  EXPECT_EQ(UnflattenError(nested, 1, as_map),
            "expected a leaf, the spec has a tuple node (at key path tree['b'][0])");
  EXPECT_EQ(UnflattenError(TreeSpec::List({}), 0, as_map),
            "expected a dict node, the spec has a list node (at key path tree)");
  EXPECT_EQ(UnflattenError(TreeSpec::Dict({1}, {TreeSpec::List({})}), 0, as_map),
            "dict key 1 is not a str as the C++ type needs (at key path tree)");

  using P = std::pair<int, std::tuple<int, int>>;
  auto as_pair = [](const TreeSpec& s, std::vector<int> l) { UnflattenAs<P>(s, std::move(l)); };
  EXPECT_EQ(UnflattenError(TreeSpec::Tuple({L(), TreeSpec::Tuple({L(), L(), L()})}), 4, as_pair),
            "the spec node has 3 children, the C++ type needs 2 (at key path tree[1])");
  EXPECT_EQ(UnflattenError(TreeSpec::Tuple({L()}), 1, as_pair),
            "the spec node has 1 children, the C++ type needs 2 (at key path tree)");

  auto as_point = [](const TreeSpec& s, std::vector<int> l) {
    std::vector<float> f(l.begin(), l.end());
    UnflattenAs<std::vector<mylib::Point>>(s, std::move(f));
  };
  EXPECT_EQ(UnflattenError(TreeSpec::List({TreeSpec::Custom("other.Point", "null", {L(), L()})}), 2,
                           as_point),
            "expected a custom node 'mylib.Point', the spec has a custom node 'other.Point' "
            "(at key path tree[0])");
  EXPECT_EQ(UnflattenError(TreeSpec::List({TreeSpec::Custom("mylib.Point", "null", {L()})}), 1,
                           as_point),
            "the spec node has 1 children, the C++ type needs more (at key path tree[0])");
  EXPECT_EQ(UnflattenError(TreeSpec::List({L(), L()}), 3, as_point).rfind("treespec.unflatten", 0),
            0u);
}

}  // namespace
}  // namespace cpytree
