// Flatten, unflatten and map over C++ values: dynamic `Tree<T>`s, std
// containers and user types with a `NodeTraits` specialization (traits.h).
//
//   Flatten(x)                -> {leaves, spec}; leaves have x's one leaf type
//   FlattenAs<L>(x)           -> {leaves, spec}; each leaf converted to L
//   Leaves(x) / Structure(x)  -> just the leaves / just the spec
//   Unflatten(spec, leaves)   -> Tree<T> rebuilt from a spec and T leaves
//   UnflattenAs<X>(spec, leaves) -> an X (e.g. std::tuple<std::vector<float>,
//                                  std::map<std::string, float>>) rebuilt
//   Map(f, tree)              -> Tree<U> of the same structure, leaves f(leaf)
//
// Specs made here are the ones Python makes for the corresponding Python
// values (a std::vector flattens like a list, a std::map like a dict with its
// keys in map order, ...), so they compare equal to, and serialize like,
// specs loaded from `treespec_dumps` output.
//
// Unflatten checks the leaf count first and the structure as it goes; a
// mismatch throws StructureError with the key path where it failed, e.g.
// "expected a leaf, the spec has a list node (at key path tree['b'][0])".
//
// Example:
//   std::map<std::string, std::vector<float>> params = {{"w", {1, 2}}, {"b", {3}}};
//   auto [leaves, spec] = cpytree::Flatten(params);   // leaves: 3, 1, 2 (map order)
//   auto tree = cpytree::Unflatten(spec, leaves);     // Tree<float>: {'b': [3.0], 'w': [1.0, 2.0]}
//   auto back = cpytree::UnflattenAs<decltype(params)>(spec, leaves);  // == params
#ifndef CPYTREE_FLATTEN_H_
#define CPYTREE_FLATTEN_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/internal/node.h"
#include "cpytree/kind.h"
#include "cpytree/spec.h"
#include "cpytree/traits.h"
#include "cpytree/tree.h"
#include "cpytree/value.h"

namespace cpytree {

// The result of Flatten: the leaves in order and the spec of the structure.
template <class L>
struct FlattenResult {
  std::vector<L> leaves;
  TreeSpec spec;
};

namespace internal {

template <class>
inline constexpr bool kAlwaysFalse = false;

// Converts a value found at a leaf position into the leaf type L.
template <class L, class Y>
L ToLeaf(const Y& y) {
  if constexpr (std::is_same_v<L, Y> || std::is_constructible_v<L, const Y&>) {
    return L(y);
  } else {
    static_assert(kAlwaysFalse<Y>,
                  "cpytree: a leaf of this C++ type cannot be converted to the requested "
                  "leaf type L; give L a constructor from it or flatten with another L");
  }
}

// Appends the post-order nodes, pre-order items and leaves of C++ values.
// L = void collects no leaves (Structure); kSpec = false builds no spec (Leaves).
//
// Nodes and items are first compared with those of `reuse` (the spec this
// thread made last, see ReuseCache) instead of being stored: while every one
// so far equals (items: is identical to) the one at the same position there,
// nothing is written, and a matching structure costs no copy at all. At the
// first difference the matched prefixes are copied from `reuse` and storing
// goes on from there.
template <class L, bool kSpec = true>
class Flattener {
 public:
  using LeafVector = std::vector<std::conditional_t<std::is_void_v<L>, char, L>>;

  Flattener(SpecData* data, LeafVector* leaves, const SpecData* reuse = nullptr)
      : data_(data), leaves_(leaves), reuse_(reuse), matching_(reuse != nullptr) {}

  // True when the spec built so far is all of `reuse`.
  bool MatchesReuse() const {
    return matching_ && num_nodes_ == reuse_->nodes.size() && num_items_ == reuse_->items.size();
  }
  // Copies the matched prefixes of `reuse`'s nodes and items into `data`
  // (call when the result does not turn out to be `reuse`).
  void StopMatching() {
    if (!matching_) return;
    matching_ = false;
    data_->nodes.reserve(reuse_->nodes.size());
    data_->nodes.assign(reuse_->nodes.begin(), reuse_->nodes.begin() + num_nodes_);
    data_->items.reserve(reuse_->items.size());
    data_->items.assign(reuse_->items.begin(), reuse_->items.begin() + num_items_);
  }

  template <class X>
  void Add(const X& x) {
    if constexpr (IsTree<X>::value) {
      AddTree(x);
    } else if constexpr (IsOptional<X>::value) {
      if (x.has_value()) {
        Add(*x);
      } else {
        AddNone();
      }
    } else if constexpr (kIsNode<X>) {
      AddNode(x);
    } else {
      PushLeaf();
      if constexpr (!std::is_void_v<L>) leaves_->push_back(ToLeaf<L>(x));
    }
  }

 private:
  // Visits a node's children: counts them, and either collects the keys of a
  // dict (first pass, so keys precede the children's items in pre-order) or
  // flattens each child (second pass).
  struct KeyCollector {
    Flattener* self;
    template <class C>
    void operator()(const C& /*child*/) {}
    template <class K, class C>
    void operator()(const K& key, const C& /*child*/) {
      self->PushItem(KeyTraits<K>::ToValue(key));
    }
  };
  struct ChildAdder {
    Flattener* self;
    std::uint32_t* arity;
    template <class C>
    void operator()(const C& child) {
      if (arity != nullptr) ++*arity;
      self->Add(child);
    }
    template <class K, class C>
    void operator()(const K& /*key*/, const C& child) {
      if (arity != nullptr) ++*arity;
      self->Add(child);
    }
  };

  // Adds one context item (matched against `reuse_` or stored).
  template <class V>
  void PushItem(V&& v) {
    if (matching_) {
      if (num_items_ < reuse_->items.size() && reuse_->items[num_items_].IdenticalTo(v)) {
        ++num_items_;
        return;
      }
      StopMatching();
    }
    data_->items.push_back(std::forward<V>(v));
    ++num_items_;
  }
  std::uint32_t ItemIndex() const { return static_cast<std::uint32_t>(num_items_); }
  // Adds one node (matched against `reuse_` or stored).
  void PushNodeRecord(const Node& n) {
    if (matching_) {
      if (num_nodes_ < reuse_->nodes.size() &&
          std::memcmp(&reuse_->nodes[num_nodes_], &n, sizeof(Node)) == 0) {
        ++num_nodes_;
        return;
      }
      StopMatching();
    }
    data_->nodes.push_back(n);
    ++num_nodes_;
  }

  void PushLeaf() {
    if constexpr (!kSpec) return;
    ++num_leaves_;
    PushNodeRecord(MakeNode(NodeKind::kLeaf, 0, ItemIndex(), 1, 1));
  }
  void AddNone() {
    PushLeaf();
    if constexpr (!std::is_void_v<L>) {
      static_assert(LeafTraits<L>::kHasNone,
                    "cpytree: a std::optional in the tree needs a leaf type that can hold None "
                    "(std::optional<T>, a pointer, Value, or a LeafTraits specialization)");
      if constexpr (LeafTraits<L>::kHasNone) leaves_->push_back(LeafTraits<L>::None());
    }
  }
  void PushNode(NodeKind kind, std::uint32_t arity, std::uint32_t ctx, std::size_t nodes_before,
                std::size_t leaves_before) {
    if constexpr (!kSpec) return;
    std::int64_t leaves = static_cast<std::int64_t>(num_leaves_ - leaves_before);
    std::int64_t count = static_cast<std::int64_t>(num_nodes_ - nodes_before) + 1;
    PushNodeRecord(MakeNode(kind, arity, ctx, leaves, count));
  }

  template <class X>
  void AddNode(const X& x) {
    using Tr = NodeTraits<X>;
    if constexpr (!kSpec) {
      Tr::Visit(x, ChildAdder{this, nullptr});
      return;
    }
    constexpr NodeKind kind = Tr::kKind;
    std::uint32_t ctx = ItemIndex();
    std::size_t nodes_before = num_nodes_, leaves_before = num_leaves_;
    if constexpr (kind == NodeKind::kNamedTuple || kind == NodeKind::kCustom) {
      PushItem(Value(Tr::TypeName()));
    }
    if constexpr (kind == NodeKind::kCustom) PushItem(Value(Tr::Context(x)));
    if constexpr (kind == NodeKind::kDeque) {
      std::optional<std::int64_t> maxlen = Tr::MaxLen(x);
      PushItem(maxlen ? Value(*maxlen) : Value());
    }
    if constexpr (kind == NodeKind::kDefaultDict) {
      TypeRef f = Tr::DefaultFactory(x);
      PushItem(Value::MakeList({f.module, f.qualname}));
    }
    if constexpr (IsDictKind(kind)) Tr::Visit(x, KeyCollector{this});
    std::size_t own_items = num_items_ - ctx;
    std::uint32_t arity = 0;
    Tr::Visit(x, ChildAdder{this, &arity});
    if (own_items != NumContextItems(kind, arity)) {
      throw Error("cpytree: NodeTraits::Visit must give every child of a dict kind a key");
    }
    PushNode(kind, arity, ctx, nodes_before, leaves_before);
  }

  // A Tree is its spec and its leaves: both are appended as they are (node
  // records are relative to their subtree; only `ctx` moves).
  template <class T>
  void AddTree(const Tree<T>& t) {
    if constexpr (!std::is_void_v<L>) {
      for (const T& v : t.leaves()) leaves_->push_back(ToLeaf<L>(v));
    }
    if constexpr (!kSpec) return;
    const TreeSpec& spec = t.spec();
    const Node* src = spec.raw_nodes();
    std::int64_t n = spec.num_nodes();
    std::size_t item_begin = src[n - 1].ctx;
    std::size_t item_count = SubtreeItemCount(src, 0, n - 1);
    std::size_t base = num_items_;
    for (std::size_t k = 0; k < item_count; ++k) PushItem(spec.raw_items()[item_begin + k]);
    AppendSubtree(src, n, base, [&](const Node& node) { PushNodeRecord(node); });
    num_leaves_ += static_cast<std::size_t>(spec.num_leaves());
  }

  SpecData* data_;
  LeafVector* leaves_;     // nullptr when L is void
  const SpecData* reuse_;  // the spec to match items against, or nullptr
  bool matching_;          // nothing stored yet: all equal reuse_'s so far
  std::size_t num_nodes_ = 0;
  std::size_t num_items_ = 0;
  std::size_t num_leaves_ = 0;
};

// Sizes of a Tree's spec arrays and leaf list, counted before flattening so
// that each array is allocated once (growing them moved every Value twice).
struct TreeCounts {
  std::size_t nodes = 0;
  std::size_t leaves = 0;
  std::size_t items = 0;
};

template <class T>
void CountTree(const Tree<T>& t, TreeCounts* counts) {
  const TreeSpec& spec = t.spec();
  counts->nodes += static_cast<std::size_t>(spec.num_nodes());
  counts->leaves += static_cast<std::size_t>(spec.num_leaves());
  counts->items += SubtreeItemCount(spec.raw_nodes(), 0, spec.num_nodes() - 1);
}

// Reserves `data` and `leaves` for flattening `x` (Trees only; other values
// are not counted, their arrays grow as they are filled).
template <class X, class LeafVector>
void ReserveFor(const X& x, SpecData* data, LeafVector* leaves) {
  if constexpr (IsTree<X>::value) {
    TreeCounts counts;
    CountTree(x, &counts);
    if (data != nullptr) {
      data->nodes.reserve(counts.nodes);
      data->items.reserve(counts.items);
    }
    if (leaves != nullptr) leaves->reserve(counts.leaves);
  }
}

// Per-thread state of Flatten / FlattenAs / Structure: the spec made last, so
// that flattening the same structure again returns that spec instead of a copy
// (the engine interns specs for the same reason).
//
// Only the owning thread touches it, so it needs no lock. The spec is held
// weakly: it dies with its last TreeSpec, as the engine's intern table holds
// specs. A Flatten nested in another (from a leaf conversion) just replaces it.
struct ReuseCache {
  std::weak_ptr<const SpecData> last;  // the spec made or returned last
};

// This thread's ReuseCache.
inline ReuseCache& ThisThreadReuse() {
  thread_local ReuseCache cache;
  return cache;
}

// Flattens `x` into a spec and, unless `leaves` is nullptr, its leaves. Returns
// this thread's last spec when `x` has exactly its nodes and identical items.
template <class L, class X, class LeafVector>
TreeSpec FlattenToSpec(const X& x, LeafVector* leaves) {
  ReuseCache& cache = ThisThreadReuse();
  std::shared_ptr<const SpecData> reuse = cache.last.lock();
  SpecData data;
  if (reuse != nullptr) {
    // Likely the same structure again: size the leaves from it, no counting pass.
    if (leaves != nullptr)
      leaves->reserve(static_cast<std::size_t>(reuse->nodes.back().num_leaves));
  } else {
    ReserveFor(x, &data, leaves);
  }
  Flattener<L> flattener(&data, leaves, reuse.get());
  flattener.Add(x);
  if (flattener.MatchesReuse()) return SpecAccess::FromData(std::move(reuse));
  flattener.StopMatching();
  if (reuse != nullptr) {
    // Sized from another structure: give back what the hint over-reserved.
    data.nodes.shrink_to_fit();
    data.items.shrink_to_fit();
    if (leaves != nullptr && leaves->capacity() > 2 * leaves->size()) leaves->shrink_to_fit();
  }
  auto shared = std::make_shared<const SpecData>(std::move(data));
  cache.last = shared;
  return SpecAccess::FromData(std::move(shared));
}

// One step of a key path, kept as a linked list and formatted only on error.
struct KeyPathStep {
  const KeyPathStep* parent;  // nullptr at the root
  const Node* node;           // the parent node of this step
  const Value* items;         // the parent's context items
  std::size_t index;          // child index in the parent

  // Formats the path from the root, e.g. "tree[0]['a']".
  static std::string Format(const KeyPathStep* step) {
    std::vector<const KeyPathStep*> steps;
    for (; step != nullptr; step = step->parent) steps.push_back(step);
    std::string out = "tree";
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      const KeyPathStep& s = **it;
      out.push_back('[');
      if (IsDictKind(s.node->kind)) {
        s.items[FirstKeyItem(s.node->kind) + s.index].AppendRepr(&out);
      } else {
        out += std::to_string(s.index);
      }
      out.push_back(']');
    }
    return out;
  }
};

inline std::string DescribeNode(const Node& n, const Value* items) {
  if (n.kind == NodeKind::kLeaf) return "a leaf";
  if (n.kind == NodeKind::kCustom || n.kind == NodeKind::kNamedTuple) {
    return std::string(n.kind == NodeKind::kCustom ? "a custom node " : "a namedtuple node ") +
           items[0].Repr();
  }
  return std::string("a ") + BuiltinTypeName(n.kind) + " node";
}

template <class Y, class = void>
struct HasKeyTraits : std::false_type {};
template <class Y>
struct HasKeyTraits<Y, std::void_t<decltype(KeyTraits<Y>::kName)>> : std::true_type {};

template <class Tr, class = void>
struct HasAccepts : std::false_type {};
template <class Tr>
struct HasAccepts<Tr, std::void_t<decltype(Tr::Accepts(NodeKind::kLeaf))>> : std::true_type {};

// Whether spec node `n`, whose context items start at `items`, takes a C++
// node with NodeTraits `Tr`: its kind (Tr::Accepts, else Tr::kKind) and, for
// custom and namedtuple nodes, its type name (the node's first item).
template <class Tr>
bool TraitsAccept(const Node& n, const Value* items) {
  bool accepted;
  if constexpr (HasAccepts<Tr>::value) {
    accepted = Tr::Accepts(n.kind);
  } else {
    accepted = n.kind == Tr::kKind;
  }
  if constexpr (Tr::kKind == NodeKind::kCustom || Tr::kKind == NodeKind::kNamedTuple) {
    accepted = accepted && items[0].as_string() == Tr::TypeName();
  }
  return accepted;
}

// How mismatch messages name a C++ node with NodeTraits `Tr`: "a custom node
// 'T'", "a namedtuple node 'T'", "a list node".
template <class Tr>
std::string TraitsNodeName() {
  if constexpr (Tr::kKind == NodeKind::kCustom) {
    return "a custom node " + Value(Tr::TypeName()).Repr();
  } else if constexpr (Tr::kKind == NodeKind::kNamedTuple) {
    return "a namedtuple node " + Value(Tr::TypeName()).Repr();
  } else {
    return std::string("a ") + BuiltinTypeName(Tr::kKind) + " node";
  }
}

template <class L>
class Unflattener;

}  // namespace internal

// What NodeTraits<X>::Build receives: the spec node being rebuilt and access
// to its children, built in order.
template <class L>
class NodeBuilder {
 public:
  // Number of children of the spec node.
  std::size_t size() const { return kids_.size(); }
  // The spec key of child `i` (dict kinds only).
  const Value& key(std::size_t i) const {
    return u_->items_[node().ctx + FirstKeyItem(node().kind) + i];
  }
  // The key of child `i` converted to K; throws StructureError if it does not convert.
  template <class K>
  K Key(std::size_t i) const {
    std::optional<K> k = KeyTraits<K>::FromValue(key(i));
    if (!k) {
      Fail("dict key " + key(i).Repr() + " is not a " + KeyTraits<K>::kName +
           " as the C++ type needs");
    }
    return std::move(*k);
  }
  // The serialized context of a custom node.
  const Value& context() const { return u_->items_[node().ctx + 1]; }
  // The maxlen of a deque node (nullopt: unbounded).
  std::optional<std::int64_t> maxlen() const {
    const Value& v = u_->items_[node().ctx];
    if (v.is_none()) return std::nullopt;
    return v.as_int();
  }
  // Throws StructureError unless the spec node has exactly `n` children.
  void ExpectArity(std::size_t n) const {
    if (size() != n) {
      Fail("the spec node has " + std::to_string(size()) + " children, the C++ type needs " +
           std::to_string(n));
    }
  }
  // Throws StructureError unless the spec node is a dict kind whose keys are
  // exactly `keys`, in that order (a struct rebuilt from a dict: its fields).
  void ExpectKeys(std::initializer_list<std::string_view> keys) const {
    bool ok = IsDictKind(node().kind) && size() == keys.size();
    std::size_t k = 0;
    for (auto it = keys.begin(); ok && it != keys.end(); ++it, ++k) {
      ok = key(k).is_string() && key(k).as_string() == *it;
    }
    if (ok) return;
    std::string want = "[";
    for (auto it = keys.begin(); it != keys.end(); ++it) {
      if (it != keys.begin()) want += ", ";
      internal::AppendPyStrRepr(&want, *it);
    }
    want += "]";
    std::string have = internal::DescribeNode(node(), u_->items_ + node().ctx);
    if (IsDictKind(node().kind)) {
      have += " with keys [";
      for (std::size_t j = 0; j < size(); ++j) {
        if (j) have += ", ";
        key(j).AppendRepr(&have);
      }
      have += "]";
    }
    Fail("the C++ type needs a dict with keys " + want + ", the spec has " + have);
  }
  // Builds the next child as a Y; throws StructureError when none is left or it does not fit.
  template <class Y>
  Y Next() {
    if (next_ >= kids_.size()) {
      Fail("the spec node has " + std::to_string(kids_.size()) +
           " children, the C++ type needs more");
    }
    std::size_t k = next_++;
    internal::KeyPathStep step{path_, &node(), u_->items_ + node().ctx, k};
    return u_->template Build<Y>(kids_[k], &step);
  }
  // Builds the next child into `out`.
  template <class Y>
  void NextInto(Y& out) {
    out = Next<Y>();
  }

 private:
  friend class internal::Unflattener<L>;
  NodeBuilder(internal::Unflattener<L>* u, std::int64_t i, const internal::KeyPathStep* path)
      : u_(u), i_(i), path_(path) {
    internal::ChildIndices(u->nodes_, i, &kids_);
  }
  const internal::Node& node() const { return u_->nodes_[i_]; }
  [[noreturn]] void Fail(const std::string& message) const {
    throw StructureError(message, internal::KeyPathStep::Format(path_));
  }

  internal::Unflattener<L>* u_;
  std::int64_t i_;
  const internal::KeyPathStep* path_;
  std::vector<std::int64_t> kids_;
  std::size_t next_ = 0;
};

namespace internal {

// Rebuilds C++ values from a spec's arrays and a leaf list, leaves in order.
template <class L>
class Unflattener {
 public:
  Unflattener(const TreeSpec& spec, std::vector<L>* leaves)
      : spec_(&spec),
        nodes_(SpecAccess::Data(spec).nodes.data()),
        items_(spec.raw_items()),
        leaves_(leaves) {}

  template <class Y>
  Y Build(std::int64_t i, const KeyPathStep* path) {
    const Node& n = nodes_[i];
    if constexpr (IsTree<Y>::value) {
      return BuildTree<typename LeafTypeOf<Y>::type>(i, path);
    } else if constexpr (IsOptional<Y>::value) {
      if constexpr (LeafTraits<L>::kHasNone) {
        if (n.kind == NodeKind::kLeaf && LeafTraits<L>::IsNone((*leaves_)[cursor_])) {
          ++cursor_;
          return Y();
        }
      }
      return Y(Build<typename Y::value_type>(i, path));
    } else if constexpr (kIsNode<Y>) {
      using Tr = NodeTraits<Y>;
      if (!TraitsAccept<Tr>(n, items_ + n.ctx)) {
        throw StructureError("expected " + TraitsNodeName<Tr>() + ", the spec has " +
                                 DescribeNode(n, items_ + n.ctx),
                             KeyPathStep::Format(path));
      }
      NodeBuilder<L> b(this, i, path);
      Y y = Tr::Build(b);
      if (b.next_ != b.size()) {
        throw StructureError("the spec node has " + std::to_string(b.size()) +
                                 " children, the C++ type used " + std::to_string(b.next_),
                             KeyPathStep::Format(path));
      }
      return y;
    } else {
      if (n.kind != NodeKind::kLeaf) {
        throw StructureError("expected a leaf, the spec has " + DescribeNode(n, items_ + n.ctx),
                             KeyPathStep::Format(path));
      }
      return FromLeaf<Y>(std::move((*leaves_)[cursor_++]), path);
    }
  }

  // Rebuilds the dynamic subtree rooted at node `root`: its spec shares the
  // storage, its leaves are moved (and converted) into one vector.
  template <class T>
  Tree<T> BuildTree(std::int64_t root, const KeyPathStep* path) {
    std::size_t n = static_cast<std::size_t>(nodes_[root].num_leaves);
    std::vector<T> leaves;
    leaves.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      leaves.push_back(FromLeaf<T>(std::move((*leaves_)[cursor_++]), path));
    }
    return Tree<T>::FromSpec(SpecAccess::Subtree(*spec_, root), std::move(leaves));
  }

 private:
  friend class NodeBuilder<L>;

  template <class Y, class From>
  static Y FromLeaf(From&& leaf, const KeyPathStep* path) {
    using F = std::decay_t<From>;
    if constexpr (std::is_same_v<Y, F>) {
      return std::forward<From>(leaf);
    } else if constexpr (IsOptional<F>::value && !IsOptional<Y>::value) {
      if (!leaf.has_value()) {
        throw StructureError("the leaf is None, but the C++ type needs a value",
                             KeyPathStep::Format(path));
      }
      return FromLeaf<Y>(std::move(*leaf), path);
    } else if constexpr (std::is_constructible_v<Y, F&&>) {
      return Y(std::forward<From>(leaf));
    } else if constexpr (std::is_same_v<F, Value> && HasKeyTraits<Y>::value) {
      // Value leaves convert to str, bool, int and float types as keys do.
      std::optional<Y> y = KeyTraits<Y>::FromValue(leaf);
      if (!y) {
        throw StructureError("the leaf " + leaf.Repr() + " is not a " + KeyTraits<Y>::kName +
                                 " as the C++ type needs",
                             KeyPathStep::Format(path));
      }
      return std::move(*y);
    } else {
      static_assert(kAlwaysFalse<Y>,
                    "cpytree: the leaf type cannot be converted to this C++ leaf type; give it a "
                    "constructor from the leaf type or unflatten from other leaves");
    }
  }

  const TreeSpec* spec_;  // the spec being rebuilt (its storage is shared with subtrees)
  const Node* nodes_;     // the whole array of the spec's storage
  const Value* items_;    // the whole item array
  std::vector<L>* leaves_;
  std::size_t cursor_ = 0;  // next leaf to consume
};

template <class L>
void CheckLeafCount(const TreeSpec& spec, std::size_t n) {
  if (static_cast<std::int64_t>(n) != spec.num_leaves()) {
    throw StructureError("treespec.unflatten(leaves): `leaves` has length " + std::to_string(n) +
                             " but the spec refers to a pytree that holds " +
                             std::to_string(spec.num_leaves()) + " items (" + spec.ToString() +
                             ").",
                         "");
  }
}

}  // namespace internal

// Flattens `x` into its leaves, converted to L, and its spec.
template <class L, class X>
FlattenResult<L> FlattenAs(const X& x) {
  if constexpr (IsTree<X>::value) {
    // The spec is the Tree's own; only the leaves are copied (one allocation).
    std::vector<L> leaves;
    leaves.reserve(x.leaves().size());
    for (const auto& v : x.leaves()) leaves.push_back(internal::ToLeaf<L>(v));
    return FlattenResult<L>{std::move(leaves), x.spec()};
  }
  std::vector<L> leaves;
  TreeSpec spec = internal::FlattenToSpec<L>(x, &leaves);
  return FlattenResult<L>{std::move(leaves), std::move(spec)};
}

// Flattens `x` into its leaves and its spec; the leaves keep x's leaf type.
template <class X>
auto Flatten(const X& x) {
  using L = LeafTypeOfT<X>;
  static_assert(!std::is_same_v<L, MixedLeaves>,
                "cpytree::Flatten: the leaves have different C++ types; use FlattenAs<L>(x) "
                "with a leaf type L they all convert to (e.g. cpytree::Value)");
  using Leaf = std::conditional_t<std::is_same_v<L, NoLeaves>, Value, L>;
  return FlattenAs<Leaf>(x);
}

// The leaves of `x`, in flatten order (no spec is built).
template <class X>
auto Leaves(const X& x) {
  using L = LeafTypeOfT<X>;
  static_assert(!std::is_same_v<L, MixedLeaves>,
                "cpytree::Leaves: the leaves have different C++ types");
  using Leaf = std::conditional_t<std::is_same_v<L, NoLeaves>, Value, L>;
  std::vector<Leaf> leaves;
  internal::ReserveFor(x, nullptr, &leaves);
  internal::Flattener<Leaf, false>(nullptr, &leaves).Add(x);
  return leaves;
}

// The spec of `x` (no leaf is copied).
template <class X>
TreeSpec Structure(const X& x) {
  if constexpr (IsTree<X>::value) return x.spec();
  return internal::FlattenToSpec<void>(x, static_cast<std::vector<char>*>(nullptr));
}

// Rebuilds a Tree<T> from `spec` and its leaves; throws StructureError if the
// number of leaves differs from spec.num_leaves().
template <class T>
Tree<T> Unflatten(const TreeSpec& spec, std::vector<T> leaves) {
  return Tree<T>::FromSpec(spec, std::move(leaves));
}

// Rebuilds a C++ value of type X from `spec` and its leaves; throws
// StructureError with the key path where the spec does not fit X.
template <class X, class L>
X UnflattenAs(const TreeSpec& spec, std::vector<L> leaves) {
  internal::CheckLeafCount<L>(spec, leaves.size());
  internal::Unflattener<L> u(spec, &leaves);
  return u.template Build<X>(internal::SpecAccess::Root(spec), nullptr);
}

// A tree of the same structure as `tree` with each leaf replaced by `f(leaf)`,
// called in leaf order.
template <class F, class T>
auto Map(F&& f, const Tree<T>& tree) -> Tree<std::decay_t<std::invoke_result_t<F&, const T&>>> {
  using U = std::decay_t<std::invoke_result_t<F&, const T&>>;
  std::vector<U> leaves;
  leaves.reserve(tree.leaves().size());
  for (const T& v : tree.leaves()) leaves.push_back(f(v));
  return Tree<U>::FromSpec(tree.spec(), std::move(leaves));
}

}  // namespace cpytree

#endif  // CPYTREE_FLATTEN_H_
