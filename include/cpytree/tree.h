// `cpytree::Tree<T>`: a dynamic pytree whose leaves are values of a user
// type `T`, the C++ counterpart of a nested Python container (as torch's
// `IValue` trees are for TorchScript).
//
// A Tree is a leaf holding a `T`, or a node of one of the spec kinds (tuple,
// list, dict, namedtuple, OrderedDict, defaultdict, deque, custom) with
// child Trees and the context items a spec node carries (dict keys, ...;
// see spec.h). `Flatten` / `Unflatten` / `Map` in flatten.h convert between
// Trees, specs and leaf lists.
//
// Representation: a Tree is its structure, a `TreeSpec` (immutable, shared
// by copies), and its leaves, one `std::vector<T>` in flatten order. So
// `Unflatten(spec, leaves)` moves the leaves in and shares the spec (no
// allocation), `Flatten(tree)` copies the leaf vector and shares the spec (one
// allocation), `Map` makes one leaf vector: O(1) allocations a call, never
// one a node. The price is on the accessors: `tree[i]`, `at(key)` and
// `children()` return child Trees *by value* (the structure is shared, the
// child's leaves are copied), and the structure cannot be edited in place
// (the leaves can: `leaves()`, `leaf()`); build a new Tree instead.
//
// Example:
//   using T = cpytree::Tree<float>;
//   T tree = T::Dict({{"w", T::List({1.f, 2.f})}, {"b", 3.f}});
//   tree.at("w")[1].leaf();  // 2.f
//   tree.leaves();           // {1.f, 2.f, 3.f}
//   tree.ToString();         // "{'w': [1.0, 2.0], 'b': 3.0}" with the default formatter
#ifndef CPYTREE_TREE_H_
#define CPYTREE_TREE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/internal/node.h"
#include "cpytree/kind.h"
#include "cpytree/spec.h"
#include "cpytree/value.h"

namespace cpytree {

// A dynamic pytree with leaves of type T: a shared structure and a leaf vector.
template <class T>
class Tree {
 public:
  using Entry = std::pair<Value, Tree>;

  // A leaf holding `value` (implicit, so `Tree<int>::List({1, 2})` works).
  Tree(T value) { leaves_.push_back(std::move(value)); }  // NOLINT

  // A leaf holding `value`.
  static Tree Leaf(T value) { return Tree(std::move(value)); }
  // A tuple of `children`.
  static Tree Tuple(std::vector<Tree> children) {
    return Join(NodeKind::kTuple, {}, std::move(children));
  }
  // A list of `children`.
  static Tree List(std::vector<Tree> children) {
    return Join(NodeKind::kList, {}, std::move(children));
  }
  // A dict of `entries`, in that (insertion) order.
  static Tree Dict(std::vector<Entry> entries) {
    return FromEntries(NodeKind::kDict, {}, std::move(entries));
  }
  // A collections.OrderedDict of `entries`.
  static Tree OrderedDict(std::vector<Entry> entries) {
    return FromEntries(NodeKind::kOrderedDict, {}, std::move(entries));
  }
  // A collections.defaultdict of `entries` with `default_factory`.
  static Tree DefaultDict(const TypeRef& default_factory, std::vector<Entry> entries) {
    return FromEntries(NodeKind::kDefaultDict,
                       Value::MakeList({default_factory.module, default_factory.qualname}),
                       std::move(entries));
  }
  // An instance of the namedtuple class serialized as `type_name`.
  static Tree NamedTuple(std::string type_name, std::vector<Tree> children) {
    return Join(NodeKind::kNamedTuple, {Value(std::move(type_name))}, std::move(children));
  }
  // A collections.deque of `children` with `maxlen` (nullopt: unbounded).
  static Tree Deque(std::vector<Tree> children, std::optional<std::int64_t> maxlen = std::nullopt) {
    return Join(NodeKind::kDeque, {maxlen ? Value(*maxlen) : Value()}, std::move(children));
  }
  // A custom node: serialized type name, serialized context (see spec.h), children.
  static Tree Custom(std::string type_name, Value context, std::vector<Tree> children) {
    return Join(NodeKind::kCustom, {Value(std::move(type_name)), std::move(context)},
                std::move(children));
  }
  // A node of any non-leaf kind from its context items and children, as
  // TreeSpec::Make takes them. Throws Error if the items do not fit the kind.
  static Tree Make(NodeKind kind, std::vector<Value> items, std::vector<Tree> children) {
    if (kind == NodeKind::kLeaf) throw Error("Tree::Make: a leaf needs a value; use Tree(value)");
    return Join(kind, std::move(items), std::move(children));
  }
  // The tree of structure `spec` holding `leaves` (moved in, structure
  // shared: no allocation). Throws StructureError if the counts differ.
  static Tree FromSpec(TreeSpec spec, std::vector<T> leaves) {
    if (static_cast<std::int64_t>(leaves.size()) != spec.num_leaves()) {
      throw StructureError(
          "treespec.unflatten(leaves): `leaves` has length " + std::to_string(leaves.size()) +
              " but the spec refers to a pytree that holds " + std::to_string(spec.num_leaves()) +
              " items (" + spec.ToString() + ").",
          "");
    }
    return Tree(std::move(spec), std::move(leaves));
  }

  // The node kind (kLeaf for a leaf).
  NodeKind kind() const { return spec_.kind(); }
  // True for a leaf.
  bool is_leaf() const { return spec_.is_leaf(); }
  // The leaf value; throws Error if this is not a leaf.
  const T& leaf() const { return CheckedLeaf(); }
  // The leaf value; throws Error if this is not a leaf.
  T& leaf() { return const_cast<T&>(CheckedLeaf()); }
  // Number of children (0 for a leaf).
  std::size_t size() const { return spec_.num_children(); }
  // Child `i`, a copy (structure shared, leaves copied); throws std::out_of_range.
  Tree operator[](std::size_t i) const { return child(i); }
  // Child `i`, a copy (structure shared, leaves copied); throws std::out_of_range.
  Tree child(std::size_t i) const {
    if (i >= size()) {
      throw std::out_of_range("Tree: child index " + std::to_string(i) + " out of range for " +
                              std::to_string(size()) + " children");
    }
    return ChildAt(i);
  }
  // The children, in order (copies).
  std::vector<Tree> children() const {
    std::vector<Tree> out;
    out.reserve(size());
    for (std::size_t k = 0; k < size(); ++k) out.push_back(ChildAt(k));
    return out;
  }
  // The child under dict key `key` (Python `==` on keys), or nullopt.
  std::optional<Tree> Find(const Value& key) const {
    if (!IsDictKind(kind())) return std::nullopt;
    for (std::size_t k = 0; k < size(); ++k) {
      if (spec_.key(k) == key) return ChildAt(k);
    }
    return std::nullopt;
  }
  // The child under dict key `key`; throws Error if absent or not a dict kind.
  Tree at(const Value& key) const {
    if (std::optional<Tree> t = Find(key)) return std::move(*t);
    throw Error("Tree::at: no key " + key.Repr());
  }
  // Number of context items of the root (as a spec node of this kind carries them).
  std::size_t num_context_items() const { return spec_.num_context_items(); }
  // Context item `i` of the root; throws std::out_of_range.
  const Value& context_item(std::size_t i) const { return spec_.context_item(i); }
  // The context items of the root, as a spec node of this kind carries them (spec.h).
  std::vector<Value> context_items() const {
    std::vector<Value> out;
    for (std::size_t k = 0; k < num_context_items(); ++k) out.push_back(context_item(k));
    return out;
  }
  // The structure.
  const TreeSpec& spec() const { return spec_; }
  // The leaves in flatten order (mutable: the structure stays as it is).
  const std::vector<T>& leaves() const { return leaves_; }
  std::vector<T>& leaves() { return leaves_; }

  // Python-like text of the tree (`(1, [2])`, `{'a': 1}`, `deque([1], maxlen=2)`,
  // `P(1, 2)` for a namedtuple, whose field names a spec does not keep).
  // `format(leaf)` renders a leaf; the default uses `operator<<`.
  template <class F>
  std::string ToString(F&& format) const {
    std::string out;
    std::size_t leaf = 0;
    AppendText(format, internal::SpecAccess::Root(spec_), &leaf, &out);
    return out;
  }
  // ToString with leaves written by `operator<<` (floats as Python reprs).
  std::string ToString() const {
    return ToString([](const T& v) {
      if constexpr (std::is_floating_point_v<T>) {
        return Value(v).Repr();
      } else {
        std::ostringstream os;
        os << v;
        return os.str();
      }
    });
  }

 private:
  Tree(TreeSpec spec, std::vector<T> leaves) : spec_(std::move(spec)), leaves_(std::move(leaves)) {}

  static Tree Join(NodeKind kind, std::vector<Value> items, std::vector<Tree> children) {
    std::vector<TreeSpec> specs;
    specs.reserve(children.size());
    std::size_t total = 0;
    for (const Tree& c : children) {
      specs.push_back(c.spec_);
      total += c.leaves_.size();
    }
    TreeSpec spec = TreeSpec::Make(kind, std::move(items), specs);
    std::vector<T> leaves;
    leaves.reserve(total);
    for (Tree& c : children) {
      for (T& v : c.leaves_) leaves.push_back(std::move(v));
    }
    return Tree(std::move(spec), std::move(leaves));
  }
  static Tree FromEntries(NodeKind kind, std::optional<Value> first, std::vector<Entry> entries) {
    std::vector<Value> items;
    std::vector<Tree> children;
    items.reserve(entries.size() + 1);
    children.reserve(entries.size());
    if (first) items.push_back(std::move(*first));
    for (Entry& e : entries) {
      items.push_back(std::move(e.first));
      children.push_back(std::move(e.second));
    }
    return Join(kind, std::move(items), std::move(children));
  }
  // Child k (k < size()): its subtree of the structure and a copy of its leaves.
  Tree ChildAt(std::size_t k) const {
    const internal::Node* nodes = internal::SpecAccess::Data(spec_).nodes.data();
    std::int64_t root = internal::SpecAccess::Root(spec_);
    std::int64_t c = root - 1;
    std::size_t after = 0;  // leaves of the children after k
    for (std::size_t j = size() - 1; j > k; --j) {
      after += static_cast<std::size_t>(nodes[c].num_leaves);
      c -= nodes[c].num_nodes;
    }
    std::size_t n = static_cast<std::size_t>(nodes[c].num_leaves);
    std::size_t first = leaves_.size() - after - n;
    return Tree(internal::SpecAccess::Subtree(spec_, c),
                std::vector<T>(leaves_.begin() + static_cast<std::ptrdiff_t>(first),
                               leaves_.begin() + static_cast<std::ptrdiff_t>(first + n)));
  }
  const T& CheckedLeaf() const {
    if (!is_leaf()) throw Error("Tree::leaf called on a node that is not a leaf");
    return leaves_[0];
  }
  template <class F>
  void AppendChildren(F& format, const std::vector<std::int64_t>& kids, const Value* keys,
                      std::size_t* leaf, std::string* out) const {
    for (std::size_t k = 0; k < kids.size(); ++k) {
      if (k) out->append(", ");
      if (keys != nullptr) {
        keys[k].AppendRepr(out);
        out->append(": ");
      }
      AppendText(format, kids[k], leaf, out);
    }
  }
  template <class F>
  void AppendText(F& format, std::int64_t i, std::size_t* leaf, std::string* out) const {
    const internal::Node* nodes = internal::SpecAccess::Data(spec_).nodes.data();
    const internal::Node& n = nodes[i];
    const Value* items = spec_.raw_items() + n.ctx;
    if (n.kind == NodeKind::kLeaf) {
      out->append(format(leaves_[(*leaf)++]));
      return;
    }
    std::vector<std::int64_t> kids;
    internal::ChildIndices(nodes, i, &kids);
    switch (n.kind) {
      case NodeKind::kLeaf:
        return;
      case NodeKind::kTuple:
        out->push_back('(');
        AppendChildren(format, kids, nullptr, leaf, out);
        out->append(kids.size() == 1 ? ",)" : ")");
        return;
      case NodeKind::kList:
        out->push_back('[');
        AppendChildren(format, kids, nullptr, leaf, out);
        out->push_back(']');
        return;
      case NodeKind::kDict:
        out->push_back('{');
        AppendChildren(format, kids, items, leaf, out);
        out->push_back('}');
        return;
      case NodeKind::kOrderedDict:  // Python 3.11's repr
        out->append("OrderedDict(");
        if (!kids.empty()) {
          out->push_back('[');
          for (std::size_t k = 0; k < kids.size(); ++k) {
            out->append(k ? ", (" : "(");
            items[k].AppendRepr(out);
            out->append(", ");
            AppendText(format, kids[k], leaf, out);
            out->push_back(')');
          }
          out->push_back(']');
        }
        out->push_back(')');
        return;
      case NodeKind::kDefaultDict: {
        const Value::List& f = items[0].as_list();
        const std::string& module = f[0].as_string();
        out->append("defaultdict(<class '")
            .append(module == "builtins" ? "" : module + ".")
            .append(f[1].as_string())
            .append("'>, {");
        AppendChildren(format, kids, items + 1, leaf, out);
        out->append("})");
        return;
      }
      case NodeKind::kDeque:
        out->append("deque([");
        AppendChildren(format, kids, nullptr, leaf, out);
        out->push_back(']');
        if (!items[0].is_none()) out->append(", maxlen=").append(items[0].Repr());
        out->push_back(')');
        return;
      case NodeKind::kNamedTuple:
      case NodeKind::kCustom: {
        const std::string& name = items[0].as_string();
        out->append(name.substr(name.rfind('.') + 1)).push_back('(');
        AppendChildren(format, kids, nullptr, leaf, out);
        out->push_back(')');
        return;
      }
    }
  }

  TreeSpec spec_;          // the structure (a leaf by default); shared by copies
  std::vector<T> leaves_;  // the leaves in flatten order: spec_.num_leaves() of them
};

}  // namespace cpytree

#endif  // CPYTREE_TREE_H_
