// `cpytree::Tree<T>`: a dynamic pytree whose leaves are values of a user
// type `T`, the C++ counterpart of a nested Python container (as torch's
// `IValue` trees are for TorchScript).
//
// A Tree is a leaf holding a `T`, or a node of one of the spec kinds (tuple,
// list, dict, namedtuple, OrderedDict, defaultdict, deque, custom) holding
// child Trees and the same context items a spec node carries (dict keys,
// ...; see spec.h). `Flatten` / `Unflatten` / `Map` in flatten.h convert
// between Trees, specs and leaf lists.
//
// Example:
//   using T = cpytree::Tree<float>;
//   T tree = T::Dict({{"w", T::List({1.f, 2.f})}, {"b", 3.f}});
//   tree.at("w")[1].leaf();  // 2.f
//   tree.ToString();         // "{'w': [1.0, 2.0], 'b': 3.0}" with the default formatter
#ifndef CPYTREE_TREE_H_
#define CPYTREE_TREE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/kind.h"
#include "cpytree/spec.h"
#include "cpytree/value.h"

namespace cpytree {

namespace internal {
struct TreeAccess;
}  // namespace internal

// A dynamic pytree with leaves of type T. Copies are deep.
template <class T>
class Tree {
 public:
  using Entry = std::pair<Value, Tree>;

  // A leaf holding `value` (implicit, so `Tree<int>::List({1, 2})` works).
  Tree(T value) : kind_(NodeKind::kLeaf), leaf_(std::move(value)) {}  // NOLINT

  // A leaf holding `value`.
  static Tree Leaf(T value) { return Tree(std::move(value)); }
  // A tuple of `children`.
  static Tree Tuple(std::vector<Tree> children) {
    return Tree(NodeKind::kTuple, {}, std::move(children));
  }
  // A list of `children`.
  static Tree List(std::vector<Tree> children) {
    return Tree(NodeKind::kList, {}, std::move(children));
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
    return Tree(NodeKind::kNamedTuple, {Value(std::move(type_name))}, std::move(children));
  }
  // A collections.deque of `children` with `maxlen` (nullopt: unbounded).
  static Tree Deque(std::vector<Tree> children, std::optional<std::int64_t> maxlen = std::nullopt) {
    return Tree(NodeKind::kDeque, {maxlen ? Value(*maxlen) : Value()}, std::move(children));
  }
  // A custom node: serialized type name, serialized context (see spec.h), children.
  static Tree Custom(std::string type_name, Value context, std::vector<Tree> children) {
    return Tree(NodeKind::kCustom, {Value(std::move(type_name)), std::move(context)},
                std::move(children));
  }
  // A node of any non-leaf kind from its context items and children, as
  // TreeSpec::Make takes them. Throws Error if the items do not fit the kind.
  static Tree Make(NodeKind kind, std::vector<Value> items, std::vector<Tree> children) {
    if (kind == NodeKind::kLeaf) throw Error("Tree::Make: a leaf needs a value; use Tree(value)");
    internal::CheckContextItems(kind, children.size(), items.data(), items.size());
    return Tree(kind, std::move(items), std::move(children));
  }

  // The node kind (kLeaf for a leaf).
  NodeKind kind() const { return kind_; }
  // True for a leaf.
  bool is_leaf() const { return kind_ == NodeKind::kLeaf; }
  // The leaf value; throws Error if this is not a leaf.
  const T& leaf() const { return CheckedLeaf(); }
  // The leaf value; throws Error if this is not a leaf.
  T& leaf() { return const_cast<T&>(CheckedLeaf()); }
  // Number of children (0 for a leaf).
  std::size_t size() const { return children_.size(); }
  // Child `i`; throws std::out_of_range.
  const Tree& operator[](std::size_t i) const { return children_.at(i); }
  // Child `i`; throws std::out_of_range.
  Tree& operator[](std::size_t i) { return children_.at(i); }
  // The child under dict key `key` (Python `==` on keys), or nullptr.
  const Tree* Find(const Value& key) const {
    if (!IsDictKind(kind_)) return nullptr;
    for (std::size_t k = 0; k < children_.size(); ++k) {
      if (items_[FirstKeyItem(kind_) + k] == key) return &children_[k];
    }
    return nullptr;
  }
  // The child under dict key `key`; throws Error if absent or not a dict kind.
  const Tree& at(const Value& key) const {
    if (const Tree* t = Find(key)) return *t;
    throw Error("Tree::at: no key " + key.Repr());
  }
  // The children, in order.
  const std::vector<Tree>& children() const { return children_; }
  // The children, in order (mutable: the structure is the caller's to keep valid).
  std::vector<Tree>& children() { return children_; }
  // The context items, as a spec node of this kind carries them (spec.h).
  const std::vector<Value>& context_items() const { return items_; }
  // Context item `i`; throws std::out_of_range.
  const Value& context_item(std::size_t i) const { return items_.at(i); }

  // Python-like text of the tree (`(1, [2])`, `{'a': 1}`, `deque([1], maxlen=2)`,
  // `P(1, 2)` for a namedtuple, whose field names a spec does not keep).
  // `format(leaf)` renders a leaf; the default uses `operator<<`.
  template <class F>
  std::string ToString(F&& format) const {
    std::string out;
    AppendText(format, &out);
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
  friend struct internal::TreeAccess;

  Tree(NodeKind kind, std::vector<Value> items, std::vector<Tree> children)
      : kind_(kind), children_(std::move(children)), items_(std::move(items)) {}

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
    return Tree(kind, std::move(items), std::move(children));
  }
  const T& CheckedLeaf() const {
    if (!leaf_) throw Error("Tree::leaf called on a node that is not a leaf");
    return *leaf_;
  }
  template <class F>
  void AppendChildren(F& format, std::string* out, std::size_t first_key) const {
    for (std::size_t k = 0; k < children_.size(); ++k) {
      if (k) out->append(", ");
      if (first_key != std::string::npos) {
        items_[first_key + k].AppendRepr(out);
        out->append(": ");
      }
      children_[k].AppendText(format, out);
    }
  }
  template <class F>
  void AppendText(F& format, std::string* out) const {
    constexpr std::size_t kNoKeys = std::string::npos;
    switch (kind_) {
      case NodeKind::kLeaf:
        out->append(format(*leaf_));
        return;
      case NodeKind::kTuple:
        out->push_back('(');
        AppendChildren(format, out, kNoKeys);
        out->append(children_.size() == 1 ? ",)" : ")");
        return;
      case NodeKind::kList:
        out->push_back('[');
        AppendChildren(format, out, kNoKeys);
        out->push_back(']');
        return;
      case NodeKind::kDict:
        out->push_back('{');
        AppendChildren(format, out, 0);
        out->push_back('}');
        return;
      case NodeKind::kOrderedDict:  // Python 3.11's repr
        out->append("OrderedDict(");
        if (!children_.empty()) {
          out->push_back('[');
          for (std::size_t k = 0; k < children_.size(); ++k) {
            out->append(k ? ", (" : "(");
            items_[k].AppendRepr(out);
            out->append(", ");
            children_[k].AppendText(format, out);
            out->push_back(')');
          }
          out->push_back(']');
        }
        out->push_back(')');
        return;
      case NodeKind::kDefaultDict: {
        const Value::List& f = items_[0].as_list();
        const std::string& module = f[0].as_string();
        out->append("defaultdict(<class '")
            .append(module == "builtins" ? "" : module + ".")
            .append(f[1].as_string())
            .append("'>, {");
        AppendChildren(format, out, 1);
        out->append("})");
        return;
      }
      case NodeKind::kDeque:
        out->append("deque([");
        AppendChildren(format, out, kNoKeys);
        out->push_back(']');
        if (!items_[0].is_none()) out->append(", maxlen=").append(items_[0].Repr());
        out->push_back(')');
        return;
      case NodeKind::kNamedTuple:
      case NodeKind::kCustom: {
        const std::string& name = items_[0].as_string();
        out->append(name.substr(name.rfind('.') + 1)).push_back('(');
        AppendChildren(format, out, kNoKeys);
        out->push_back(')');
        return;
      }
    }
  }

  NodeKind kind_;
  std::vector<Tree> children_;  // empty for a leaf
  std::vector<Value> items_;    // context items, exactly as the spec node holds them
  std::optional<T> leaf_;       // set iff kind_ == kLeaf
};

namespace internal {

// Library-internal construction without validation, for items copied from a
// spec or a tree that were validated when they were made.
struct TreeAccess {
  template <class T>
  static Tree<T> MakeUnchecked(NodeKind kind, std::vector<Value> items,
                               std::vector<Tree<T>> children) {
    return Tree<T>(kind, std::move(items), std::move(children));
  }
};

}  // namespace internal
}  // namespace cpytree

#endif  // CPYTREE_TREE_H_
