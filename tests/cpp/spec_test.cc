// Tests of cpytree::TreeSpec: builders of every kind, counts, children,
// context accessors, repr text, equality and hashing, and that the storage is
// the engine's post-order node model.
#include "cpytree/spec.h"

#include <stdexcept>
#include <unordered_set>
#include <vector>

#include "cpytree/internal/node.h"
#include "gtest/gtest.h"

namespace cpytree {
namespace {

TreeSpec L() { return TreeSpec::Leaf(); }

// ({'a': *, 'b': (*,)}, [*, *]) as Python builds it.
TreeSpec Sample() {
  return TreeSpec::Tuple({TreeSpec::Dict({"a", "b"}, {L(), TreeSpec::Tuple({L()})}),
                          TreeSpec::List({L(), L()})});
}

TEST(SpecTest, LeafCounts) {
  TreeSpec leaf;
  EXPECT_TRUE(leaf.is_leaf());
  EXPECT_EQ(leaf.kind(), NodeKind::kLeaf);
  EXPECT_EQ(leaf.num_leaves(), 1);
  EXPECT_EQ(leaf.num_nodes(), 1);
  EXPECT_EQ(leaf.num_children(), 0u);
  EXPECT_EQ(leaf.ToString(), "*");
}

TEST(SpecTest, CountsMatchPython) {
  TreeSpec s = Sample();
  EXPECT_EQ(s.num_leaves(), 4);
  EXPECT_EQ(s.num_nodes(), 8);
  EXPECT_EQ(s.num_children(), 2u);
  EXPECT_FALSE(s.is_leaf());
  TreeSpec empty = TreeSpec::Tuple({});
  EXPECT_FALSE(empty.is_leaf());  // torch: is_leaf() is False for ()
  EXPECT_EQ(empty.num_leaves(), 0);
  EXPECT_EQ(empty.num_nodes(), 1);
}

TEST(SpecTest, ChildrenShareStorageAndKeepCounts) {
  TreeSpec s = Sample();
  TreeSpec d = s.child(0);
  EXPECT_EQ(d.kind(), NodeKind::kDict);
  EXPECT_EQ(d.num_leaves(), 2);
  EXPECT_EQ(d.child(1).kind(), NodeKind::kTuple);
  EXPECT_EQ(d.key(1), Value("b"));
  EXPECT_EQ(d.raw_items(), s.raw_items());  // no copy
  std::vector<TreeSpec> kids = s.children();
  ASSERT_EQ(kids.size(), 2u);
  EXPECT_EQ(kids[1], TreeSpec::List({L(), L()}));
  EXPECT_THROW(s.child(2), std::out_of_range);
}

TEST(SpecTest, StorageIsTheEnginePostOrderModel) {
  TreeSpec s = Sample();
  const internal::Node* nodes = s.raw_nodes();
  EXPECT_TRUE(internal::IsWellFormed(nodes, s.num_nodes()));
  // Post-order: a b tuple dict ... root last.
  std::vector<NodeKind> kinds;
  for (std::int64_t i = 0; i < s.num_nodes(); ++i) kinds.push_back(nodes[i].kind);
  EXPECT_EQ(kinds, (std::vector<NodeKind>{NodeKind::kLeaf, NodeKind::kLeaf, NodeKind::kTuple,
                                          NodeKind::kDict, NodeKind::kLeaf, NodeKind::kLeaf,
                                          NodeKind::kList, NodeKind::kTuple}));
  // Items in pre-order: the dict's keys start at its ctx.
  EXPECT_EQ(s.raw_items()[nodes[3].ctx], Value("a"));
  EXPECT_TRUE(internal::IsWellFormed(s.child(0).raw_nodes(), s.child(0).num_nodes()));
}

TEST(SpecTest, RebuildingFromChildrenGivesEqualSpec) {
  TreeSpec s = Sample();
  TreeSpec again = TreeSpec::Tuple(s.children());
  EXPECT_EQ(again, s);
  EXPECT_EQ(again.Hash(), s.Hash());
  EXPECT_EQ(again.ToString(), s.ToString());
}

TEST(SpecTest, ReprMatchesTorch) {
  // Expected text is torch 2.13's repr of the same spec.
  EXPECT_EQ(TreeSpec::Dict({"a", "b"}, {L(), TreeSpec::Tuple({L(), L()})}).ToString(),
            "TreeSpec(dict, ['a', 'b'], [*,\n  TreeSpec(tuple, None, [*,\n    *])])");
  EXPECT_EQ(TreeSpec::Tuple({}).ToString(), "TreeSpec(tuple, None, [])");
  EXPECT_EQ(TreeSpec::List({L()}).ToString(), "TreeSpec(list, None, [*])");
  EXPECT_EQ(TreeSpec::NamedTuple("__main__.P", {L(), L()}).ToString(),
            "TreeSpec(namedtuple, <class '__main__.P'>, [*,\n  *])");
  EXPECT_EQ(TreeSpec::OrderedDict({"b"}, {L()}).ToString(), "TreeSpec(OrderedDict, ['b'], [*])");
  EXPECT_EQ(TreeSpec::DefaultDict({"builtins", "list"}, {"k"}, {L()}).ToString(),
            "TreeSpec(defaultdict, [<class 'list'>, ['k']], [*])");
  EXPECT_EQ(TreeSpec::DefaultDict({"mod", "F"}, {}, {}).ToString(),
            "TreeSpec(defaultdict, [<class 'mod.F'>, []], [])");
  EXPECT_EQ(TreeSpec::Deque(3, {L(), L()}).ToString(), "TreeSpec(deque, 3, [*,\n  *])");
  EXPECT_EQ(TreeSpec::Deque(std::nullopt, {}).ToString(), "TreeSpec(deque, None, [])");
  EXPECT_EQ(TreeSpec::Custom("my.mod.Pair", "[\"tag\", 1]", {L()}).ToString(),
            "TreeSpec(Pair, ['tag', 1], [*])");
  EXPECT_EQ(TreeSpec::Custom("Pair", "plain text", {}).ToString(), "TreeSpec(Pair, plain text, [])");
  EXPECT_EQ(TreeSpec::Custom("Pair", "\"s\"", {}).ToString(), "TreeSpec(Pair, s, [])");
  EXPECT_EQ(TreeSpec::Custom("Box", Value::MakeObject({{"n", 2}}), {}).ToString(),
            "TreeSpec(Box, {'n': 2}, [])");
}

TEST(SpecTest, ReprIndentsNestedChildren) {
  TreeSpec s = TreeSpec::List({TreeSpec::Tuple({L(), TreeSpec::List({L(), L()})}), L(), L()});
  EXPECT_EQ(s.ToString(),
            "TreeSpec(list, None, [TreeSpec(tuple, None, [*,\n"
            "    TreeSpec(list, None, [*,\n"
            "      *])]),\n"
            "  *,\n"
            "  *])");
}

TEST(SpecTest, ContextAccessors) {
  TreeSpec dd = TreeSpec::DefaultDict({"builtins", "int"}, {1, "x"}, {L(), L()});
  EXPECT_EQ(dd.default_factory(), (TypeRef{"builtins", "int"}));
  EXPECT_EQ(dd.keys(), (std::vector<Value>{1, "x"}));
  EXPECT_EQ(dd.num_context_items(), 3u);
  EXPECT_EQ(dd.serialized_type(), "collections.defaultdict");
  EXPECT_EQ(TreeSpec::Deque(4, {}).maxlen(), 4);
  EXPECT_EQ(TreeSpec::Deque(std::nullopt, {}).maxlen(), std::nullopt);
  TreeSpec c = TreeSpec::Custom("pkg.Node", Value("null"), {});
  EXPECT_EQ(c.node_type_name(), "pkg.Node");
  EXPECT_EQ(c.custom_context(), Value("null"));
  EXPECT_EQ(c.python_type_name(), "Node");
  EXPECT_EQ(c.serialized_type(), "pkg.Node");
  EXPECT_EQ(TreeSpec::NamedTuple("m.P", {}).node_type_name(), "m.P");
  EXPECT_EQ(TreeSpec::Tuple({}).serialized_type(), "builtins.tuple");
  EXPECT_EQ(L().serialized_type(), "");
  EXPECT_THROW(TreeSpec::List({}).keys(), Error);
  EXPECT_THROW(TreeSpec::List({}).maxlen(), Error);
  EXPECT_THROW(TreeSpec::Dict({}, {}).default_factory(), Error);
  EXPECT_THROW(L().node_type_name(), Error);
  EXPECT_THROW(TreeSpec::Dict({"a"}, {L()}).key(1), std::out_of_range);
  EXPECT_THROW(L().context_item(0), std::out_of_range);
}

TEST(SpecTest, MakeValidatesContextItems) {
  EXPECT_THROW(TreeSpec::Dict({"a"}, {L(), L()}), Error);
  EXPECT_THROW(TreeSpec::Make(NodeKind::kTuple, {Value(1)}, {}), Error);
  EXPECT_THROW(TreeSpec::Make(NodeKind::kDefaultDict, {Value("list")}, {}), Error);
  EXPECT_THROW(TreeSpec::Make(NodeKind::kNamedTuple, {Value(3)}, {}), Error);
  EXPECT_THROW(TreeSpec::Make(NodeKind::kCustom, {Value(""), Value()}, {}), Error);
  EXPECT_THROW(TreeSpec::Make(NodeKind::kDeque, {Value(-1)}, {}), Error);
  EXPECT_THROW(TreeSpec::Make(NodeKind::kDeque, {Value("3")}, {}), Error);
  EXPECT_THROW(TreeSpec::Make(NodeKind::kLeaf, {}, {L()}), Error);
  EXPECT_THROW(TreeSpec::Make(static_cast<NodeKind>(42), {}, {}), Error);
  EXPECT_EQ(TreeSpec::Make(NodeKind::kLeaf, {}, {}), L());
}

TEST(SpecTest, EqualityIsStructural) {
  EXPECT_EQ(Sample(), Sample());
  EXPECT_NE(TreeSpec::Tuple({L()}), TreeSpec::List({L()}));
  EXPECT_NE(TreeSpec::Dict({"a"}, {L()}), TreeSpec::Dict({"b"}, {L()}));
  EXPECT_NE(TreeSpec::Dict({"a"}, {L()}), TreeSpec::OrderedDict({"a"}, {L()}));
  EXPECT_NE(TreeSpec::Dict({"a", "b"}, {L(), L()}), TreeSpec::Dict({"b", "a"}, {L(), L()}));
  EXPECT_NE(TreeSpec::Tuple({L(), TreeSpec::Tuple({})}), TreeSpec::Tuple({TreeSpec::Tuple({}), L()}));
  EXPECT_NE(TreeSpec::Deque(1, {}), TreeSpec::Deque(2, {}));
  EXPECT_NE(TreeSpec::NamedTuple("a.P", {}), TreeSpec::NamedTuple("a.Q", {}));
  EXPECT_NE(TreeSpec::Custom("T", "1", {}), TreeSpec::Custom("T", "2", {}));
  // torch compares contexts with ==, so {1: *} == {1.0: *} == {True: *}.
  EXPECT_EQ(TreeSpec::Dict({1}, {L()}), TreeSpec::Dict({1.0}, {L()}));
  EXPECT_EQ(TreeSpec::Dict({1}, {L()}), TreeSpec::Dict({true}, {L()}));
}

TEST(SpecTest, HashWorksInContainers) {
  std::unordered_set<TreeSpec> set = {Sample(), L(), TreeSpec::Tuple({})};
  EXPECT_EQ(set.size(), 3u);
  EXPECT_EQ(set.count(TreeSpec::Tuple(Sample().children())), 1u);
  EXPECT_EQ(set.count(TreeSpec::List({})), 0u);
  EXPECT_EQ(std::hash<TreeSpec>()(TreeSpec::Dict({1}, {L()})),
            std::hash<TreeSpec>()(TreeSpec::Dict({1.0}, {L()})));
}

TEST(SpecTest, SubtreeEqualityComparesRanges) {
  TreeSpec s = TreeSpec::Tuple({TreeSpec::List({L()}), TreeSpec::List({L()})});
  EXPECT_EQ(s.child(0), s.child(1));
  EXPECT_EQ(s.child(0).Hash(), s.child(1).Hash());
  EXPECT_NE(s.child(0), s);
}

}  // namespace
}  // namespace cpytree
