// The node record of a flat, post-order spec array, and the index arithmetic
// over it. Not API: the public spec types wrap it.
//
// Post-order means children come before their parent and the root is last.
// The subtree rooted at node `i` is the range [i - nodes[i].num_nodes + 1, i],
// so a node's children are found by walking left from `i - 1`, skipping one
// child subtree at a time.
//
// Context items (dict keys, a namedtuple class, ...) live in a separate array
// in *pre-order*: a node's own items come first, then its descendants'. So the
// items of any subtree are one contiguous range, starting at its root's `ctx`.
//
//   std::vector<Node> nodes = ...;
//   ForEachChildReversed(nodes.data(), root, [&](std::int64_t c) { ... });
#ifndef CPYTREE_INTERNAL_NODE_H_
#define CPYTREE_INTERNAL_NODE_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpytree/internal/hash_mix.h"
#include "cpytree/kind.h"

namespace cpytree {
namespace internal {

// One spec node. Plain data with no padding holes, so that arrays of nodes can
// be hashed and compared as bytes (that is how interning compares specs).
struct Node {
  NodeKind kind;              // what the node rebuilds into
  std::uint8_t reserved0[3];  // explicit padding, always zero
  std::uint32_t arity;        // number of children (0 for a leaf)
  std::uint32_t ctx;          // index of the node's first context item (pre-order)
  std::uint32_t reserved1;    // explicit padding, always zero
  std::int64_t num_leaves;    // leaves in this subtree: slices leaves on unflatten
  std::int64_t num_nodes;     // nodes in this subtree: finds sibling subtrees
};

static_assert(sizeof(Node) == 32, "Node must stay 32 bytes with no hidden padding");
static_assert(std::has_unique_object_representations_v<Node>,
              "Node is hashed and compared bytewise: it may not have padding");
static_assert(std::is_trivially_copyable_v<Node>, "Node arrays are copied with memcpy");

// Makes a node with all padding zeroed.
inline Node MakeNode(NodeKind kind, std::uint32_t arity, std::uint32_t ctx, std::int64_t num_leaves,
                     std::int64_t num_nodes) {
  Node n{};
  n.kind = kind;
  n.arity = arity;
  n.ctx = ctx;
  n.num_leaves = num_leaves;
  n.num_nodes = num_nodes;
  return n;
}

// Calls `f(child_index)` for each child of node `i`, last child first.
template <class F>
void ForEachChildReversed(const Node* nodes, std::int64_t i, F&& f) {
  std::int64_t c = i - 1;
  for (std::uint32_t k = 0; k < nodes[i].arity; ++k) {
    f(c);
    c -= nodes[c].num_nodes;
  }
}

// The indices of node `i`'s children, first child first.
inline void ChildIndices(const Node* nodes, std::int64_t i, std::vector<std::int64_t>* out) {
  out->resize(nodes[i].arity);
  std::size_t k = out->size();
  ForEachChildReversed(nodes, i, [&](std::int64_t c) { (*out)[--k] = c; });
}

// Index of the first node of the subtree rooted at `i`.
inline std::int64_t SubtreeBegin(const Node* nodes, std::int64_t i) {
  return i - nodes[i].num_nodes + 1;
}

// Number of context items in the subtree [begin, root] of `nodes`.
inline std::size_t SubtreeItemCount(const Node* nodes, std::int64_t begin, std::int64_t root) {
  std::size_t n = 0;
  for (std::int64_t i = begin; i <= root; ++i) n += NumContextItems(nodes[i].kind, nodes[i].arity);
  return n;
}

// Folds node `n`'s shape (kind, arity) into `h`: the one node-shape hash of
// the engine's intern table and spec hash and of the header library's spec
// hash. Counts and offsets follow from the post-order shapes, so they are not
// hashed; contexts are hashed by each caller its own way.
inline std::size_t HashNodeShape(std::size_t h, const Node& n) {
  return HashMix(h, (static_cast<std::size_t>(n.kind) << 32) ^ n.arity);
}

// Whether two arrays of n nodes have the same shape: the same post-order
// sequence of (kind, arity) is the same tree, contexts aside.
inline bool SameShape(const Node* a, const Node* b, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (a[i].kind != b[i].kind || a[i].arity != b[i].arity) return false;
  }
  return true;
}

// Joins a whole tree (n nodes, post-order, its items starting at its root's
// ctx) under a new parent: calls push(node) for each node, first to last,
// with ctx renumbered so the tree's items start at `item_base` in the
// parent's item array. The caller appends the items themselves (their type
// differs between the engine and the header library).
template <class Push>
void AppendSubtree(const Node* src, std::int64_t n, std::size_t item_base, Push&& push) {
  std::size_t item_begin = src[n - 1].ctx;
  for (std::int64_t k = 0; k < n; ++k) {
    Node node = src[k];
    node.ctx = static_cast<std::uint32_t>(node.ctx - item_begin + item_base);
    push(node);
  }
}

// Checks the counts of a post-order array: every node's num_nodes and
// num_leaves agree with its children, and the array is exactly one tree.
// Returns false on the first inconsistency (used on untrusted input).
inline bool IsWellFormed(const Node* nodes, std::int64_t n) {
  if (n <= 0) return false;
  std::vector<std::int64_t> stack;  // indices of completed subtrees
  for (std::int64_t i = 0; i < n; ++i) {
    const Node& node = nodes[i];
    if (node.kind == NodeKind::kLeaf) {
      if (node.arity != 0 || node.num_leaves != 1 || node.num_nodes != 1) return false;
      stack.push_back(i);
      continue;
    }
    if (stack.size() < node.arity) return false;
    std::int64_t leaves = 0, count = 1;
    for (std::uint32_t k = 0; k < node.arity; ++k) {
      leaves += nodes[stack.back()].num_leaves;
      count += nodes[stack.back()].num_nodes;
      stack.pop_back();
    }
    if (node.num_leaves != leaves || node.num_nodes != count) return false;
    stack.push_back(i);
  }
  return stack.size() == 1 && stack[0] == n - 1;
}

}  // namespace internal
}  // namespace cpytree

#endif  // CPYTREE_INTERNAL_NODE_H_
