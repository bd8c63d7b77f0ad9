// Flatten against a known spec: check that a C++ value has the structure a
// spec describes and collect its leaves, in one pass. The C++ twin of
// Python's `spec.flatten` / `torch.fx._pytree.tree_flatten_spec`, the call a
// runtime makes on every input of an exported model.
//
//   std::vector<L> FlattenSpec<L>(spec, x)
//
// `x` is a `Tree<T>`, a std container, a type with `NodeTraits` (traits.h) or
// any mix of them; each leaf is converted to L. The spec's nodes are matched
// as follows, and any mismatch throws StructureError naming the key path of
// the spec node where it failed (e.g. `tree[0]['a'][1]`):
//   leaf            any leaf of x (a value that is not a node); a
//                   std::optional that is empty gives LeafTraits<L>::None()
//   tuple / list    a node of x whose kind the C++ type accepts (a std::vector
//                   takes either), with as many children
//   dict kinds      a node of x with the same number of children and the same
//                   keys (Python `==`), in any order: children are matched by
//                   key, as torch's dict flatten_spec looks them up, and the
//                   leaves come out in the spec's key order
//   namedtuple      a node of x of that kind whose NodeTraits::TypeName() is
//                   the spec's class name
//   custom          the same, and NodeTraits::Context(x) equal to the spec's
//                   context (a Tree compares its context items)
// Nothing is allocated but the result (and, for a dict of more than 16
// keys, one scratch array).
//
// Example:
//   TreeSpec in_spec = cpytree::Loads(call_spec[0]);
//   std::vector<at::Tensor> flat = cpytree::FlattenSpec<at::Tensor>(in_spec, inputs);
#ifndef CPYTREE_FLATTEN_AGAINST_H_
#define CPYTREE_FLATTEN_AGAINST_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/flatten.h"
#include "cpytree/internal/node.h"
#include "cpytree/kind.h"
#include "cpytree/spec.h"
#include "cpytree/traits.h"
#include "cpytree/tree.h"
#include "cpytree/value.h"

namespace cpytree {
namespace internal {

// Walks a C++ value and a spec together, writing leaves into their slots.
template <class L>
class SpecMatcher {
 public:
  SpecMatcher(const TreeSpec& spec, L* out)
      : spec_(&spec),
        nodes_(SpecAccess::Data(spec).nodes.data()),
        items_(spec.raw_items()),
        out_(out) {}

  // Matches `x` against the subtree rooted at node `i`, whose first leaf goes
  // to `out_[leaf]`.
  template <class X>
  void Match(const X& x, std::int64_t i, std::size_t leaf, const KeyPathStep* path) {
    const Node& n = nodes_[i];
    if constexpr (IsTree<X>::value) {
      MatchTree(x, i, leaf, path);
    } else if constexpr (IsOptional<X>::value) {
      if (x.has_value()) {
        Match(*x, i, leaf, path);
      } else if (n.kind != NodeKind::kLeaf) {
        Fail("the value is None, the spec has " + DescribeNode(n, items_ + n.ctx), path);
      } else {
        static_assert(LeafTraits<L>::kHasNone,
                      "cpytree: a std::optional in the value needs a leaf type that can hold "
                      "None (std::optional<T>, a pointer, Value, or a LeafTraits specialization)");
        if constexpr (LeafTraits<L>::kHasNone) out_[leaf] = LeafTraits<L>::None();
      }
    } else if constexpr (kIsNode<X>) {
      MatchNode(x, i, leaf, path);
    } else {
      if (n.kind != NodeKind::kLeaf) {
        Fail("the value is a leaf, the spec has " + DescribeNode(n, items_ + n.ctx), path);
      }
      out_[leaf] = ToLeaf<L>(x);
    }
  }

 private:
  [[noreturn]] static void Fail(const std::string& message, const KeyPathStep* path) {
    throw StructureError(message, KeyPathStep::Format(path));
  }

  // The children of node `i`, first to last: their node index and first leaf.
  // Up to 16 live on the stack; more take one heap array.
  struct Child {
    std::int64_t node;
    std::size_t leaf;
  };
  class Children {
   public:
    Children(const Node* nodes, std::int64_t i, std::size_t leaf) : n_(nodes[i].arity) {
      if (n_ > kInline) heap_.resize(n_);
      Child* c = first();
      std::size_t k = n_;
      ForEachChildReversed(nodes, i, [&](std::int64_t j) { c[--k].node = j; });
      for (std::size_t m = 0; m < n_; ++m) {
        c[m].leaf = leaf;
        leaf += static_cast<std::size_t>(nodes[c[m].node].num_leaves);
      }
    }
    Child* first() { return n_ > kInline ? heap_.data() : inline_; }
    std::size_t size() const { return n_; }

   private:
    static constexpr std::size_t kInline = 16;
    std::size_t n_;
    Child inline_[kInline];
    std::vector<Child> heap_;
  };

  // Index of the spec child whose key is `key`, trying `hint` first; or -1.
  static std::int64_t FindKey(const Value* keys, std::size_t n, const Value& key,
                              std::size_t hint) {
    if (hint < n && keys[hint] == key) return static_cast<std::int64_t>(hint);
    for (std::size_t k = 0; k < n; ++k) {
      if (keys[k] == key) return static_cast<std::int64_t>(k);
    }
    return -1;
  }

  [[noreturn]] void FailKey(const Node& n, const Value& key, const KeyPathStep* path) const {
    const Value* keys = items_ + n.ctx + FirstKeyItem(n.kind);
    std::string text = "[";
    for (std::uint32_t k = 0; k < n.arity; ++k) {
      if (k) text += ", ";
      keys[k].AppendRepr(&text);
    }
    Fail("the value has the key " + key.Repr() + ", which is not among the spec's keys " + text +
             "]",
         path);
  }
  [[noreturn]] void FailArity(const Node& n, std::size_t got, const KeyPathStep* path) const {
    Fail("the spec has " + DescribeNode(n, items_ + n.ctx) + " with " + std::to_string(n.arity) +
             " children, the value has " + std::to_string(got),
         path);
  }

  // A Tree: when its spec equals the spec's subtree (O(1) when it is that
  // very subtree, e.g. a Tree from Unflatten), its leaves are copied over;
  // otherwise the two node arrays are walked together (dicts by key).
  template <class T>
  void MatchTree(const Tree<T>& t, std::int64_t i, std::size_t leaf, const KeyPathStep* path) {
    const std::vector<T>& leaves = t.leaves();
    if (t.spec() == SpecAccess::Subtree(*spec_, i)) {
      for (std::size_t k = 0; k < leaves.size(); ++k) out_[leaf + k] = ToLeaf<L>(leaves[k]);
      return;
    }
    const TreeSpec& ts = t.spec();
    MatchTreeNode(SpecAccess::Data(ts).nodes.data(), ts.raw_items(), SpecAccess::Root(ts),
                  leaves.data(), i, leaf, path);
  }

  template <class T>
  void MatchTreeNode(const Node* tn, const Value* titems, std::int64_t ti, const T* tleaves,
                     std::int64_t i, std::size_t leaf, const KeyPathStep* path) {
    const Node& n = nodes_[i];
    const Node& m = tn[ti];
    const Value* spec_items = items_ + n.ctx;
    const Value* tree_items = titems + m.ctx;
    if (m.kind == NodeKind::kLeaf) {
      if (n.kind != NodeKind::kLeaf) {
        Fail("the value is a leaf, the spec has " + DescribeNode(n, spec_items), path);
      }
      out_[leaf] = ToLeaf<L>(*tleaves);
      return;
    }
    if (n.kind != m.kind) {
      Fail("the spec has " + DescribeNode(n, spec_items) + ", the value is " +
               DescribeNode(m, tree_items),
           path);
    }
    if (n.arity != m.arity) FailArity(n, m.arity, path);
    std::size_t first_key = FirstKeyItem(n.kind);
    std::size_t own = IsDictKind(n.kind) ? first_key : NumContextItems(n.kind, n.arity);
    for (std::size_t k = 0; k < own; ++k) {
      if (tree_items[k] != spec_items[k]) {
        Fail("the spec has " + DescribeNode(n, spec_items) + " with context " +
                 spec_items[k].Repr() + ", the value's is " + tree_items[k].Repr(),
             path);
      }
    }
    Children kids(nodes_, i, leaf);
    Children tkids(tn, ti, 0);
    Child* c = kids.first();
    Child* tc = tkids.first();
    for (std::size_t k = 0; k < kids.size(); ++k) {
      std::size_t slot = k;
      if (IsDictKind(n.kind)) {
        const Value& key = tree_items[first_key + k];
        std::int64_t found = FindKey(spec_items + first_key, n.arity, key, k);
        if (found < 0) FailKey(n, key, path);
        slot = static_cast<std::size_t>(found);
      }
      KeyPathStep step{path, &n, spec_items, slot};
      MatchTreeNode(tn, titems, tc[k].node, tleaves + tc[k].leaf, c[slot].node, c[slot].leaf,
                    &step);
    }
  }

  // Counts the children NodeTraits<X>::Visit gives.
  struct Counter {
    std::size_t* n;
    template <class C>
    void operator()(const C&) {
      ++*n;
    }
    template <class K, class C>
    void operator()(const K&, const C&) {
      ++*n;
    }
  };
  // Matches each child NodeTraits<X>::Visit gives against the spec's children.
  struct ChildMatcher {
    SpecMatcher* self;
    const Node* node;
    const Value* items;
    Child* kids;
    const KeyPathStep* path;
    std::size_t k = 0;
    template <class C>
    void operator()(const C& child) {
      KeyPathStep step{path, node, items, k};
      self->Match(child, kids[k].node, kids[k].leaf, &step);
      ++k;
    }
    template <class K, class C>
    void operator()(const K& key, const C& child) {
      Value v = KeyTraits<K>::ToValue(key);
      std::size_t first = FirstKeyItem(node->kind);
      std::int64_t found = FindKey(items + first, node->arity, v, k);
      if (found < 0) self->FailKey(*node, v, path);
      std::size_t slot = static_cast<std::size_t>(found);
      KeyPathStep step{path, node, items, slot};
      self->Match(child, kids[slot].node, kids[slot].leaf, &step);
      ++k;
    }
  };

  template <class X>
  void MatchNode(const X& x, std::int64_t i, std::size_t leaf, const KeyPathStep* path) {
    using Tr = NodeTraits<X>;
    const Node& n = nodes_[i];
    const Value* spec_items = items_ + n.ctx;
    if (!TraitsAccept<Tr>(n, spec_items)) {
      Fail("the spec has " + DescribeNode(n, spec_items) + ", the value is " + TraitsNodeName<Tr>(),
           path);
    }
    if constexpr (Tr::kKind == NodeKind::kCustom) {
      Value context(Tr::Context(x));
      if (context != spec_items[1]) {
        Fail("the spec has " + DescribeNode(n, spec_items) + " with context " +
                 spec_items[1].Repr() + ", the value's is " + context.Repr(),
             path);
      }
    }
    std::size_t count = 0;
    Tr::Visit(x, Counter{&count});
    if (count != n.arity) FailArity(n, count, path);
    Children kids(nodes_, i, leaf);
    Tr::Visit(x, ChildMatcher{this, &n, spec_items, kids.first(), path});
  }

  const TreeSpec* spec_;  // the spec matched against
  const Node* nodes_;     // the whole node array of the spec's storage
  const Value* items_;    // the whole item array
  L* out_;                // num_leaves() slots
};

}  // namespace internal

// The leaves of `x`, converted to L, in the order of `spec`; throws
// StructureError (with the key path) unless x has spec's structure. See the
// file comment for how nodes match.
template <class L, class X>
std::vector<L> FlattenSpec(const TreeSpec& spec, const X& x) {
  static_assert(std::is_default_constructible_v<L>,
                "cpytree::FlattenSpec fills a vector of num_leaves() default leaves");
  std::vector<L> out(static_cast<std::size_t>(spec.num_leaves()));
  internal::SpecMatcher<L>(spec, out.data()).Match(x, internal::SpecAccess::Root(spec), 0, nullptr);
  return out;
}

}  // namespace cpytree

#endif  // CPYTREE_FLATTEN_AGAINST_H_
