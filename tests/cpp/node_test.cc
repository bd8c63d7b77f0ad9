// Tests of the post-order node model shared by the engine and the header
// library: child index arithmetic, subtree ranges and well-formedness.
#include "cpytree/internal/node.h"

#include <vector>

#include "gtest/gtest.h"

namespace cpytree {
namespace internal {
namespace {

Node Leaf() { return MakeNode(NodeKind::kLeaf, 0, 0, 1, 1); }

// ([a, b], {"x": c}) in post-order: a b list c dict tuple.
std::vector<Node> Sample() {
  return {Leaf(),
          Leaf(),
          MakeNode(NodeKind::kList, 2, 0, 2, 3),
          Leaf(),
          MakeNode(NodeKind::kDict, 1, 0, 1, 2),
          MakeNode(NodeKind::kTuple, 2, 0, 3, 6)};
}

TEST(NodeTest, ChildIndicesOfRoot) {
  std::vector<Node> nodes = Sample();
  std::vector<std::int64_t> children;
  ChildIndices(nodes.data(), 5, &children);
  EXPECT_EQ(children, (std::vector<std::int64_t>{2, 4}));
}

TEST(NodeTest, ChildIndicesOfInnerNode) {
  std::vector<Node> nodes = Sample();
  std::vector<std::int64_t> children;
  ChildIndices(nodes.data(), 2, &children);
  EXPECT_EQ(children, (std::vector<std::int64_t>{0, 1}));
  ChildIndices(nodes.data(), 0, &children);
  EXPECT_TRUE(children.empty());
}

TEST(NodeTest, SubtreeBegin) {
  std::vector<Node> nodes = Sample();
  EXPECT_EQ(SubtreeBegin(nodes.data(), 5), 0);
  EXPECT_EQ(SubtreeBegin(nodes.data(), 4), 3);
  EXPECT_EQ(SubtreeBegin(nodes.data(), 2), 0);
  EXPECT_EQ(SubtreeBegin(nodes.data(), 3), 3);
}

TEST(NodeTest, EmptyContainersAreNodesWithoutLeaves) {
  std::vector<Node> nodes = {MakeNode(NodeKind::kTuple, 0, 0, 0, 1), Leaf(),
                             MakeNode(NodeKind::kList, 2, 0, 1, 3)};
  EXPECT_TRUE(IsWellFormed(nodes.data(), 3));
  std::vector<std::int64_t> children;
  ChildIndices(nodes.data(), 2, &children);
  EXPECT_EQ(children, (std::vector<std::int64_t>{0, 1}));
}

TEST(NodeTest, WellFormedAcceptsSample) {
  std::vector<Node> nodes = Sample();
  EXPECT_TRUE(IsWellFormed(nodes.data(), static_cast<std::int64_t>(nodes.size())));
}

TEST(NodeTest, WellFormedRejectsWrongCounts) {
  std::vector<Node> nodes = Sample();
  nodes[5].num_leaves = 4;
  EXPECT_FALSE(IsWellFormed(nodes.data(), 6));
  nodes = Sample();
  nodes[2].num_nodes = 2;
  EXPECT_FALSE(IsWellFormed(nodes.data(), 6));
}

TEST(NodeTest, WellFormedRejectsForestsAndUnderflow) {
  std::vector<Node> two_roots = {Leaf(), Leaf()};
  EXPECT_FALSE(IsWellFormed(two_roots.data(), 2));
  std::vector<Node> underflow = {Leaf(), MakeNode(NodeKind::kTuple, 2, 0, 1, 2)};
  EXPECT_FALSE(IsWellFormed(underflow.data(), 2));
  EXPECT_FALSE(IsWellFormed(nullptr, 0));
}

TEST(NodeTest, LeafWithChildrenIsRejected) {
  Node bad = MakeNode(NodeKind::kLeaf, 1, 0, 1, 1);
  EXPECT_FALSE(IsWellFormed(&bad, 1));
}

TEST(KindTest, ContextItemCounts) {
  EXPECT_EQ(NumContextItems(NodeKind::kLeaf, 0), 0u);
  EXPECT_EQ(NumContextItems(NodeKind::kTuple, 3), 0u);
  EXPECT_EQ(NumContextItems(NodeKind::kDict, 3), 3u);
  EXPECT_EQ(NumContextItems(NodeKind::kOrderedDict, 2), 2u);
  EXPECT_EQ(NumContextItems(NodeKind::kDefaultDict, 2), 3u);
  EXPECT_EQ(NumContextItems(NodeKind::kNamedTuple, 5), 1u);
  EXPECT_EQ(NumContextItems(NodeKind::kDeque, 5), 1u);
  EXPECT_EQ(NumContextItems(NodeKind::kCustom, 5), 2u);
  EXPECT_EQ(FirstKeyItem(NodeKind::kDefaultDict), 1u);
  EXPECT_EQ(FirstKeyItem(NodeKind::kDict), 0u);
}

TEST(KindTest, BuiltinNamesMatchTorchRepr) {
  EXPECT_STREQ(BuiltinTypeName(NodeKind::kNamedTuple), "namedtuple");
  EXPECT_STREQ(BuiltinTypeName(NodeKind::kOrderedDict), "OrderedDict");
  EXPECT_EQ(BuiltinTypeName(NodeKind::kCustom), nullptr);
  EXPECT_EQ(BuiltinTypeName(NodeKind::kLeaf), nullptr);
}

}  // namespace
}  // namespace internal
}  // namespace cpytree
