// `cpytree::TreeSpec`: the structure of a pytree, as torch's TreeSpec
// describes it, for C++ programs with no Python.
//
// A spec is stored exactly as the CPython engine stores one: a flat array of
// `internal::Node` in post-order (children before their parent, the root
// last) plus an array of context items in pre-order (see kind.h for which
// items each kind carries). Same kinds, same traversal order, same counts, so
// `num_nodes()` and `num_leaves()` agree with Python's for the same spec.
//
// A TreeSpec is immutable and cheap to copy: copies and the specs returned by
// `child(i)` share one array (a shared pointer and a root index).
//
// Context items, per kind (all `cpytree::Value`):
//   dict, OrderedDict   one key per child
//   defaultdict         [module, qualname] of the default factory, then the keys
//   namedtuple          the class's serialized type name (a str)
//   deque               maxlen: None or an int
//   custom              the serialized type name (a str), then the context as
//                       protocol-1 JSON holds it (for nodes registered without
//                       `to_dumpable_context`, a str of JSON text)
//
// `ToString()` is the text of Python's `repr(spec)`, e.g.
//   TreeSpec(dict, ['a', 'b'], [*,
//     TreeSpec(tuple, None, [*,
//       *])])
//
// Example:
//   using cpytree::TreeSpec;
//   TreeSpec spec = TreeSpec::Dict({"a", "b"},
//                                  {TreeSpec::Leaf(), TreeSpec::Tuple({TreeSpec::Leaf()})});
//   spec.num_leaves();  // 2
//   spec.child(1).kind();  // NodeKind::kTuple
#ifndef CPYTREE_SPEC_H_
#define CPYTREE_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/internal/context_text.h"
#include "cpytree/internal/node.h"
#include "cpytree/kind.h"
#include "cpytree/value.h"

namespace cpytree {

// A Python class named by module and qualified name (a defaultdict's factory).
struct TypeRef {
  std::string module;    // e.g. "builtins"
  std::string qualname;  // e.g. "list"

  friend bool operator==(const TypeRef& a, const TypeRef& b) {
    return a.module == b.module && a.qualname == b.qualname;
  }
  friend bool operator!=(const TypeRef& a, const TypeRef& b) { return !(a == b); }
};

namespace internal {

// The storage shared by a spec and its subtrees.
struct SpecData {
  std::vector<Node> nodes;   // post-order; the root of the whole array is last
  std::vector<Value> items;  // context items in pre-order; Node::ctx indexes here
};

struct SpecAccess;

}  // namespace internal

// The structure of a pytree. Immutable; copies share storage.
class TreeSpec {
 public:
  // A leaf (Python's `*`).
  TreeSpec() : TreeSpec(LeafData(), 0) {}

  // A leaf.
  static TreeSpec Leaf() { return TreeSpec(); }
  // A tuple of `children`.
  static TreeSpec Tuple(const std::vector<TreeSpec>& children) {
    return Make(NodeKind::kTuple, {}, children);
  }
  // A list of `children`.
  static TreeSpec List(const std::vector<TreeSpec>& children) {
    return Make(NodeKind::kList, {}, children);
  }
  // A dict whose key `keys[i]` holds `children[i]` (in that order).
  static TreeSpec Dict(std::vector<Value> keys, const std::vector<TreeSpec>& children) {
    return Make(NodeKind::kDict, std::move(keys), children);
  }
  // A collections.OrderedDict; like Dict.
  static TreeSpec OrderedDict(std::vector<Value> keys, const std::vector<TreeSpec>& children) {
    return Make(NodeKind::kOrderedDict, std::move(keys), children);
  }
  // A collections.defaultdict with `default_factory`; otherwise like Dict.
  static TreeSpec DefaultDict(const TypeRef& default_factory, std::vector<Value> keys,
                              const std::vector<TreeSpec>& children) {
    keys.insert(keys.begin(), Value::MakeList({default_factory.module, default_factory.qualname}));
    return Make(NodeKind::kDefaultDict, std::move(keys), children);
  }
  // An instance of the namedtuple class serialized as `type_name`.
  static TreeSpec NamedTuple(std::string type_name, const std::vector<TreeSpec>& children) {
    return Make(NodeKind::kNamedTuple, {Value(std::move(type_name))}, children);
  }
  // A collections.deque with `maxlen` (nullopt: unbounded).
  static TreeSpec Deque(std::optional<std::int64_t> maxlen, const std::vector<TreeSpec>& children) {
    return Make(NodeKind::kDeque, {maxlen ? Value(*maxlen) : Value()}, children);
  }
  // A registered custom node: its serialized type name and serialized context.
  static TreeSpec Custom(std::string type_name, Value context,
                         const std::vector<TreeSpec>& children) {
    return Make(NodeKind::kCustom, {Value(std::move(type_name)), std::move(context)}, children);
  }
  // A node of any kind from its context items (as listed in the file
  // comment) and children. Throws Error if the items do not fit the kind.
  static TreeSpec Make(NodeKind kind, std::vector<Value> items,
                       const std::vector<TreeSpec>& children);

  // The kind of the root node.
  NodeKind kind() const { return root().kind; }
  // True for a leaf spec (Python's `is_leaf()`).
  bool is_leaf() const { return root().kind == NodeKind::kLeaf; }
  // Number of leaves of the tree.
  std::int64_t num_leaves() const { return root().num_leaves; }
  // Number of nodes of the tree, leaves included.
  std::int64_t num_nodes() const { return root().num_nodes; }
  // Number of children of the root.
  std::size_t num_children() const { return root().arity; }
  // The spec of child `i` of the root; throws std::out_of_range if i >= num_children().
  TreeSpec child(std::size_t i) const;
  // The specs of all children of the root, in order.
  std::vector<TreeSpec> children() const;

  // Number of context items of the root (NumContextItems(kind, arity)).
  std::size_t num_context_items() const { return NumContextItems(kind(), num_children()); }
  // Context item `i` of the root; throws std::out_of_range when out of range.
  const Value& context_item(std::size_t i) const;
  // Key of child `i` of a dict-kind root; throws Error for other kinds.
  const Value& key(std::size_t i) const;
  // All keys of a dict-kind root, in child order; throws Error for other kinds.
  std::vector<Value> keys() const;
  // The default factory of a defaultdict root; throws Error for other kinds.
  TypeRef default_factory() const;
  // The maxlen of a deque root (nullopt: unbounded); throws Error for other kinds.
  std::optional<std::int64_t> maxlen() const;
  // The class name of a namedtuple root, or the type name of a custom root,
  // as serialized; throws Error for other kinds.
  const std::string& node_type_name() const;
  // The serialized context of a custom root; throws Error for other kinds.
  const Value& custom_context() const;
  // The protocol-1 "type" field: "builtins.dict", ..., a custom node's
  // serialized name; empty for a leaf.
  std::string serialized_type() const;
  // The type name Python's repr shows: "dict", "namedtuple", the last dotted
  // component of a custom node's serialized name; empty for a leaf.
  std::string python_type_name() const;

  // Python's `repr(spec)`, byte for byte (see the file comment for limits).
  std::string ToString() const;
  // Structural equality with torch's semantics (Python `==` on contexts).
  friend bool operator==(const TreeSpec& a, const TreeSpec& b) { return a.Equals(b); }
  friend bool operator!=(const TreeSpec& a, const TreeSpec& b) { return !a.Equals(b); }
  // A hash consistent with `==`.
  std::size_t Hash() const;

  // Low level: the post-order nodes of this subtree (the root is
  // `raw_nodes()[num_nodes() - 1]`); their `ctx` index `raw_items()`.
  const internal::Node* raw_nodes() const { return data_->nodes.data() + begin(); }
  // Low level: the context item array that `Node::ctx` indexes.
  const Value* raw_items() const { return data_->items.data(); }

 private:
  friend struct internal::SpecAccess;

  TreeSpec(std::shared_ptr<const internal::SpecData> data, std::int64_t root)
      : data_(std::move(data)), root_(root) {}

  static const std::shared_ptr<const internal::SpecData>& LeafData() {
    static const std::shared_ptr<const internal::SpecData> leaf = [] {
      auto d = std::make_shared<internal::SpecData>();
      d->nodes.push_back(internal::MakeNode(NodeKind::kLeaf, 0, 0, 1, 1));
      return std::shared_ptr<const internal::SpecData>(std::move(d));
    }();
    return leaf;
  }
  const internal::Node& root() const { return data_->nodes[static_cast<std::size_t>(root_)]; }
  std::int64_t begin() const { return root_ - root().num_nodes + 1; }
  std::int64_t ChildIndex(std::size_t i) const;
  void RequireKind(bool ok, const char* what) const {
    if (!ok) throw Error(std::string(what) + " called on a spec of kind " + DescribeKind());
  }
  std::string DescribeKind() const { return is_leaf() ? std::string("leaf") : python_type_name(); }
  void AppendRepr(std::int64_t i, int indent, std::string* out) const;
  void AppendContextStr(std::int64_t i, std::string* out) const;
  bool Equals(const TreeSpec& other) const;

  std::shared_ptr<const internal::SpecData> data_;
  std::int64_t root_;  // index of this spec's root in data_->nodes
};

namespace internal {

// Library-internal access to TreeSpec storage (flatten.h builds specs directly).
struct SpecAccess {
  static TreeSpec FromData(std::shared_ptr<const SpecData> data) {
    std::int64_t root = static_cast<std::int64_t>(data->nodes.size()) - 1;
    return TreeSpec(std::move(data), root);
  }
  static const SpecData& Data(const TreeSpec& s) { return *s.data_; }
  // The subtree of `s`'s storage rooted at node `root` (shares the storage).
  static TreeSpec Subtree(const TreeSpec& s, std::int64_t root) { return TreeSpec(s.data_, root); }
  static std::int64_t Root(const TreeSpec& s) { return s.root_; }
};

// Throws Error unless `items` are valid context items for a `kind` node of `arity`.
inline void CheckContextItems(NodeKind kind, std::size_t arity, const Value* items,
                              std::size_t num_items) {
  const char* name = kind == NodeKind::kCustom ? "custom" : BuiltinTypeName(kind);
  if (kind == NodeKind::kLeaf) {
    if (arity != 0 || num_items != 0) throw Error("a leaf has no children and no context");
    return;
  }
  if (num_items != NumContextItems(kind, arity)) {
    throw Error(std::string("a ") + name + " node with " + std::to_string(arity) +
                " children needs " + std::to_string(NumContextItems(kind, arity)) +
                " context items, got " + std::to_string(num_items));
  }
  switch (kind) {
    case NodeKind::kDefaultDict: {
      const Value& f = items[0];
      if (!f.is_list() || f.as_list().size() != 2 || !f.as_list()[0].is_string() ||
          !f.as_list()[1].is_string()) {
        throw Error("a defaultdict's factory must be [module, qualname], got " + f.Repr());
      }
      return;
    }
    case NodeKind::kNamedTuple:
    case NodeKind::kCustom:
      if (!items[0].is_string() || items[0].as_string().empty()) {
        throw Error(std::string("a ") + name + " node's type name must be a non-empty str, got " +
                    items[0].Repr());
      }
      return;
    case NodeKind::kDeque:
      if (!(items[0].is_none() ||
            (items[0].type() == Value::Type::kInt && items[0].as_int() >= 0))) {
        throw Error("a deque's maxlen must be None or an int >= 0, got " + items[0].Repr());
      }
      return;
    default:
      return;
  }
}

}  // namespace internal

inline TreeSpec TreeSpec::Make(NodeKind kind, std::vector<Value> items,
                               const std::vector<TreeSpec>& children) {
  using internal::Node;
  if (static_cast<int>(kind) >= kNumNodeKinds) {
    throw Error("invalid node kind " + std::to_string(static_cast<int>(kind)));
  }
  if (kind == NodeKind::kLeaf && items.empty() && children.empty()) return Leaf();
  internal::CheckContextItems(kind, children.size(), items.data(), items.size());
  std::size_t total_nodes = 1;
  for (const TreeSpec& c : children) total_nodes += static_cast<std::size_t>(c.num_nodes());
  auto data = std::make_shared<internal::SpecData>();
  data->nodes.reserve(total_nodes);
  data->items = std::move(items);
  std::int64_t leaves = 0;
  for (const TreeSpec& c : children) {
    const Node* src = c.raw_nodes();
    std::int64_t n = c.num_nodes();
    std::size_t item_begin = src[n - 1].ctx;
    std::size_t item_count = internal::SubtreeItemCount(src, 0, n - 1);
    std::size_t base = data->items.size();
    if (base + item_count > std::numeric_limits<std::uint32_t>::max()) {
      throw Error("spec too large: more than 2^32 context items");
    }
    internal::AppendSubtree(src, n, base, [&](const Node& node) { data->nodes.push_back(node); });
    data->items.insert(data->items.end(), c.raw_items() + item_begin,
                       c.raw_items() + item_begin + item_count);
    leaves += c.num_leaves();
  }
  if (children.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error("spec node with more than 2^32 children");
  }
  data->nodes.push_back(internal::MakeNode(kind, static_cast<std::uint32_t>(children.size()), 0,
                                           leaves, static_cast<std::int64_t>(total_nodes)));
  return internal::SpecAccess::FromData(std::move(data));
}

inline std::int64_t TreeSpec::ChildIndex(std::size_t i) const {
  if (i >= num_children()) {
    throw std::out_of_range("TreeSpec::child: index " + std::to_string(i) + " out of range for " +
                            std::to_string(num_children()) + " children");
  }
  // Children are found walking left from the root; skip the ones after `i`.
  const internal::Node* nodes = data_->nodes.data();
  std::int64_t c = root_ - 1;
  for (std::size_t k = num_children() - 1; k > i; --k) c -= nodes[c].num_nodes;
  return c;
}

inline TreeSpec TreeSpec::child(std::size_t i) const { return TreeSpec(data_, ChildIndex(i)); }

inline std::vector<TreeSpec> TreeSpec::children() const {
  std::vector<TreeSpec> out(num_children());
  std::size_t k = out.size();
  internal::ForEachChildReversed(data_->nodes.data(), root_,
                                 [&](std::int64_t c) { out[--k] = TreeSpec(data_, c); });
  return out;
}

inline const Value& TreeSpec::context_item(std::size_t i) const {
  if (i >= num_context_items()) {
    throw std::out_of_range("TreeSpec::context_item: index " + std::to_string(i) + " out of range");
  }
  return data_->items[root().ctx + i];
}

inline const Value& TreeSpec::key(std::size_t i) const {
  RequireKind(IsDictKind(kind()), "TreeSpec::key");
  if (i >= num_children()) throw std::out_of_range("TreeSpec::key: index out of range");
  return data_->items[root().ctx + FirstKeyItem(kind()) + i];
}

inline std::vector<Value> TreeSpec::keys() const {
  RequireKind(IsDictKind(kind()), "TreeSpec::keys");
  const Value* first = data_->items.data() + root().ctx + FirstKeyItem(kind());
  return std::vector<Value>(first, first + num_children());
}

inline TypeRef TreeSpec::default_factory() const {
  RequireKind(kind() == NodeKind::kDefaultDict, "TreeSpec::default_factory");
  const Value::List& f = data_->items[root().ctx].as_list();
  return TypeRef{f[0].as_string(), f[1].as_string()};
}

inline std::optional<std::int64_t> TreeSpec::maxlen() const {
  RequireKind(kind() == NodeKind::kDeque, "TreeSpec::maxlen");
  const Value& v = data_->items[root().ctx];
  if (v.is_none()) return std::nullopt;
  return v.as_int();
}

inline const std::string& TreeSpec::node_type_name() const {
  RequireKind(kind() == NodeKind::kNamedTuple || kind() == NodeKind::kCustom,
              "TreeSpec::node_type_name");
  return data_->items[root().ctx].as_string();
}

inline const Value& TreeSpec::custom_context() const {
  RequireKind(kind() == NodeKind::kCustom, "TreeSpec::custom_context");
  return data_->items[root().ctx + 1];
}

inline std::string TreeSpec::serialized_type() const {
  if (kind() == NodeKind::kLeaf) return "";
  if (kind() == NodeKind::kCustom) return node_type_name();
  return SerializedTypeName(kind());
}

inline std::string TreeSpec::python_type_name() const {
  if (kind() == NodeKind::kLeaf) return "";
  if (kind() != NodeKind::kCustom) return BuiltinTypeName(kind());
  // `type.__name__` is the last component of `module.qualname`.
  const std::string& name = node_type_name();
  return name.substr(name.rfind('.') + 1);
}

inline void TreeSpec::AppendContextStr(std::int64_t i, std::string* out) const {
  const internal::Node& n = data_->nodes[static_cast<std::size_t>(i)];
  const Value* items = data_->items.data() + n.ctx;
  const auto append_keys = [&](const Value* keys) {
    out->push_back('[');
    for (std::uint32_t k = 0; k < n.arity; ++k) {
      if (k) out->append(", ");
      keys[k].AppendRepr(out);
    }
    out->push_back(']');
  };
  const auto append_class = [&](const std::string& module, const std::string& qualname) {
    // repr of a class: builtins are shown without their module.
    out->append("<class '");
    if (module != "builtins") out->append(module).push_back('.');
    out->append(qualname).append("'>");
  };
  switch (n.kind) {
    case NodeKind::kLeaf:
    case NodeKind::kTuple:
    case NodeKind::kList:
      out->append("None");
      return;
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
      append_keys(items);
      return;
    case NodeKind::kDefaultDict: {
      out->push_back('[');
      const Value::List& f = items[0].as_list();
      append_class(f[0].as_string(), f[1].as_string());
      out->append(", ");
      append_keys(items + 1);
      out->push_back(']');
      return;
    }
    case NodeKind::kNamedTuple:
      // The serialized name is conventionally `module.qualname`.
      out->append("<class '").append(items[0].as_string()).append("'>");
      return;
    case NodeKind::kDeque:
      items[0].AppendRepr(out);
      return;
    case NodeKind::kCustom: {
      // Without a custom from_dumpable_context torch json-decodes the context.
      const Value& ctx = items[1];
      if (ctx.is_string()) {
        std::optional<Value> decoded = internal::DecodeContextText(ctx.as_string());
        out->append(decoded ? decoded->Str() : ctx.as_string());
      } else {
        out->append(ctx.Str());
      }
      return;
    }
  }
}

inline void TreeSpec::AppendRepr(std::int64_t i, int indent, std::string* out) const {
  const internal::Node& n = data_->nodes[static_cast<std::size_t>(i)];
  if (n.kind == NodeKind::kLeaf) {
    out->push_back('*');
    return;
  }
  out->append("TreeSpec(");
  out->append(TreeSpec(data_, i).python_type_name());
  out->append(", ");
  AppendContextStr(i, out);
  out->append(", [");
  if (n.arity > 0) {
    indent += 2;
    std::vector<std::int64_t> kids;
    internal::ChildIndices(data_->nodes.data(), i, &kids);
    for (std::size_t k = 0; k < kids.size(); ++k) {
      if (k > 0) {
        out->append(",\n");
        out->append(static_cast<std::size_t>(indent), ' ');
      }
      AppendRepr(kids[k], indent, out);
    }
  }
  out->append("])");
}

inline std::string TreeSpec::ToString() const {
  std::string out;
  AppendRepr(root_, 0, &out);
  return out;
}

inline bool TreeSpec::Equals(const TreeSpec& other) const {
  if (data_ == other.data_ && root_ == other.root_) return true;
  std::int64_t n = num_nodes();
  if (n != other.num_nodes() || num_leaves() != other.num_leaves()) return false;
  const internal::Node* a = raw_nodes();
  const internal::Node* b = other.raw_nodes();
  // Same post-order shape node by node means the same tree; then the contexts.
  if (!internal::SameShape(a, b, n)) return false;
  for (std::int64_t k = 0; k < n; ++k) {
    std::size_t m = NumContextItems(a[k].kind, a[k].arity);
    for (std::size_t j = 0; j < m; ++j) {
      if (data_->items[a[k].ctx + j] != other.data_->items[b[k].ctx + j]) return false;
    }
  }
  return true;
}

inline std::size_t TreeSpec::Hash() const {
  std::size_t h = 0x74726565;
  const internal::Node* nodes = raw_nodes();
  for (std::int64_t k = 0; k < num_nodes(); ++k) {
    const internal::Node& n = nodes[k];
    h = internal::HashNodeShape(h, n);
    std::size_t m = NumContextItems(n.kind, n.arity);
    for (std::size_t j = 0; j < m; ++j) h = internal::HashMix(h, data_->items[n.ctx + j].Hash());
  }
  return h;
}

}  // namespace cpytree

template <>
struct std::hash<cpytree::TreeSpec> {
  std::size_t operator()(const cpytree::TreeSpec& s) const { return s.Hash(); }
};

#endif  // CPYTREE_SPEC_H_
