// Compile-time pytree traits: which C++ types are nodes of a pytree, how to
// visit their children and how to rebuild them, used by flatten.h.
//
// Built in (spec kind in brackets):
//   std::vector<Y>, std::array<Y, N>  [list], [tuple]; rebuilt from a list or a tuple spec
//   std::tuple<Y...>, std::pair<A, B> [tuple]
//   std::map<K, V>                    [dict], keys in map order
//   std::unordered_map<K, V>          [dict], keys sorted (a stable order)
//   std::optional<Y>                  not a node: the Y subtree, or a None leaf
//   cpytree::Tree<T>                  whatever the Tree holds
// Any other type is a leaf. Map keys convert to spec keys through
// `KeyTraits<K>` (strings, integers, bool, floating point, Value).
//
// A None leaf needs a leaf type that can hold None: `LeafTraits<L>` says which
// can (std::optional, pointers, shared_ptr, Value). Flatten deduces such a
// leaf type (e.g. std::optional<float>) when a tree contains std::optional.
//
// Your own type becomes a node by specializing NodeTraits:
//
//   struct Point { float x, y; };
//   template <>
//   struct cpytree::NodeTraits<Point> {
//     static constexpr NodeKind kKind = NodeKind::kCustom;
//     using Children = std::tuple<float, float>;        // for leaf type deduction
//     static std::string TypeName() { return "mylib.Point"; }  // kCustom, kNamedTuple
//     static Value Context(const Point&) { return "null"; }    // kCustom: serialized context
//     template <class F> static void Visit(const Point& p, F&& f) { f(p.x); f(p.y); }
//     template <class B> static Point Build(B& b) {
//       Point p;
//       b.NextInto(p.x);
//       b.NextInto(p.y);
//       return p;
//     }
//   };
//
// Visit calls `f(child)` per child in order, or `f(key, child)` for the dict
// kinds. Build pulls children in order from the builder `b`: `b.Next<Y>()`
// (write `b.template Next<Y>()` in templates) or `b.NextInto(y)`; `b.size()`
// is the spec node's arity and `b.key(i)` / `b.Key<K>(i)` its keys. Optional
// members: `static bool Accepts(NodeKind)` (default: `kind == kKind`),
// `MaxLen(x)` for kDeque, `DefaultFactory(x)` for kDefaultDict.
#ifndef CPYTREE_TRAITS_H_
#define CPYTREE_TRAITS_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "cpytree/kind.h"
#include "cpytree/tree.h"
#include "cpytree/value.h"

namespace cpytree {

// Primary template: a type without a specialization is a leaf.
template <class X, class Enable = void>
struct NodeTraits {};

// Says whether leaf type L can hold Python's None. Specialize for your own
// leaf types (e.g. an IValue-like variant) with kHasNone, None() and IsNone().
template <class L, class Enable = void>
struct LeafTraits {
  static constexpr bool kHasNone = false;
};

// Converts map keys of type K to and from spec keys. Specialize for your own
// key types with Name, ToValue and FromValue.
template <class K, class Enable = void>
struct KeyTraits {};

// True when NodeTraits<X> makes X a node type.
template <class X, class = void>
struct IsNode : std::false_type {};
template <class X>
struct IsNode<X, std::void_t<decltype(NodeTraits<X>::kKind)>> : std::true_type {};
template <class X>
inline constexpr bool kIsNode = IsNode<X>::value;

template <class X>
struct IsTree : std::false_type {};
template <class T>
struct IsTree<Tree<T>> : std::true_type {};

template <class X>
struct IsOptional : std::false_type {};
template <class Y>
struct IsOptional<std::optional<Y>> : std::true_type {};

// ---- LeafTraits -------------------------------------------------------------

template <class U>
struct LeafTraits<std::optional<U>> {
  static constexpr bool kHasNone = true;
  static std::optional<U> None() { return std::nullopt; }
  static bool IsNone(const std::optional<U>& v) { return !v.has_value(); }
};
template <class U>
struct LeafTraits<U*> {
  static constexpr bool kHasNone = true;
  static U* None() { return nullptr; }
  static bool IsNone(const U* v) { return v == nullptr; }
};
template <class U>
struct LeafTraits<std::shared_ptr<U>> {
  static constexpr bool kHasNone = true;
  static std::shared_ptr<U> None() { return nullptr; }
  static bool IsNone(const std::shared_ptr<U>& v) { return v == nullptr; }
};
template <>
struct LeafTraits<Value> {
  static constexpr bool kHasNone = true;
  static Value None() { return Value(); }
  static bool IsNone(const Value& v) { return v.is_none(); }
};

// ---- KeyTraits --------------------------------------------------------------

template <>
struct KeyTraits<std::string> {
  static constexpr const char* kName = "str";
  static Value ToValue(const std::string& k) { return Value(k); }
  static std::optional<std::string> FromValue(const Value& v) {
    if (!v.is_string()) return std::nullopt;
    return v.as_string();
  }
};
template <>
struct KeyTraits<bool> {
  static constexpr const char* kName = "bool";
  static Value ToValue(bool k) { return Value(k); }
  static std::optional<bool> FromValue(const Value& v) {
    if (!v.is_bool()) return std::nullopt;
    return v.as_bool();
  }
};
template <class I>
struct KeyTraits<I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>>> {
  static constexpr const char* kName = "int";
  static Value ToValue(I k) { return Value(k); }
  static std::optional<I> FromValue(const Value& v) {
    if (v.type() != Value::Type::kInt) return std::nullopt;
    std::int64_t i = v.as_int();
    if constexpr (std::is_unsigned_v<I>) {
      if (i < 0 || static_cast<std::uint64_t>(i) > std::numeric_limits<I>::max()) {
        return std::nullopt;
      }
    } else {
      if (i < std::numeric_limits<I>::min() || i > std::numeric_limits<I>::max()) {
        return std::nullopt;
      }
    }
    return static_cast<I>(i);
  }
};
template <class F>
struct KeyTraits<F, std::enable_if_t<std::is_floating_point_v<F>>> {
  static constexpr const char* kName = "float";
  static Value ToValue(F k) { return Value(k); }
  static std::optional<F> FromValue(const Value& v) {
    if (v.is_float()) return static_cast<F>(v.as_float());
    if (v.type() == Value::Type::kInt) return static_cast<F>(v.as_int());
    return std::nullopt;
  }
};
template <>
struct KeyTraits<Value> {
  static constexpr const char* kName = "Value";
  static Value ToValue(const Value& k) { return k; }
  static std::optional<Value> FromValue(const Value& v) { return v; }
};

// ---- NodeTraits for std containers ------------------------------------------

template <class Y, class A>
struct NodeTraits<std::vector<Y, A>> {
  static constexpr NodeKind kKind = NodeKind::kList;
  using Children = std::tuple<Y>;
  static bool Accepts(NodeKind k) { return k == NodeKind::kList || k == NodeKind::kTuple; }
  template <class F>
  static void Visit(const std::vector<Y, A>& v, F&& f) {
    for (const auto& y : v) f(y);
  }
  template <class B>
  static std::vector<Y, A> Build(B& b) {
    std::vector<Y, A> v;
    v.reserve(b.size());
    for (std::size_t k = 0; k < b.size(); ++k) v.push_back(b.template Next<Y>());
    return v;
  }
};

template <class Y, std::size_t N>
struct NodeTraits<std::array<Y, N>> {
  static constexpr NodeKind kKind = NodeKind::kTuple;
  using Children = std::tuple<Y>;
  static bool Accepts(NodeKind k) { return k == NodeKind::kList || k == NodeKind::kTuple; }
  template <class F>
  static void Visit(const std::array<Y, N>& v, F&& f) {
    for (const auto& y : v) f(y);
  }
  template <class B>
  static std::array<Y, N> Build(B& b) {
    b.ExpectArity(N);
    return BuildAll(b, std::make_index_sequence<N>());
  }

 private:
  template <class B, std::size_t... I>
  static std::array<Y, N> BuildAll(B& b, std::index_sequence<I...>) {
    return {{(static_cast<void>(I), b.template Next<Y>())...}};  // braced: left to right
  }
};

template <class... Ys>
struct NodeTraits<std::tuple<Ys...>> {
  static constexpr NodeKind kKind = NodeKind::kTuple;
  using Children = std::tuple<Ys...>;
  template <class F>
  static void Visit(const std::tuple<Ys...>& t, F&& f) {
    std::apply([&](const auto&... y) { (f(y), ...); }, t);
  }
  template <class B>
  static std::tuple<Ys...> Build(B& b) {
    b.ExpectArity(sizeof...(Ys));
    return std::tuple<Ys...>{b.template Next<Ys>()...};  // braced: left to right
  }
};

template <class A, class C>
struct NodeTraits<std::pair<A, C>> {
  static constexpr NodeKind kKind = NodeKind::kTuple;
  using Children = std::tuple<A, C>;
  template <class F>
  static void Visit(const std::pair<A, C>& p, F&& f) {
    f(p.first);
    f(p.second);
  }
  template <class B>
  static std::pair<A, C> Build(B& b) {
    b.ExpectArity(2);
    A a = b.template Next<A>();
    return std::pair<A, C>(std::move(a), b.template Next<C>());
  }
};

template <class K, class V, class Cmp, class A>
struct NodeTraits<std::map<K, V, Cmp, A>> {
  static constexpr NodeKind kKind = NodeKind::kDict;
  using Children = std::tuple<V>;
  static bool Accepts(NodeKind k) { return IsDictKind(k); }
  template <class F>
  static void Visit(const std::map<K, V, Cmp, A>& m, F&& f) {
    for (const auto& kv : m) f(kv.first, kv.second);
  }
  template <class B>
  static std::map<K, V, Cmp, A> Build(B& b) {
    std::map<K, V, Cmp, A> m;
    for (std::size_t k = 0; k < b.size(); ++k) {
      K key = b.template Key<K>(k);
      m.emplace(std::move(key), b.template Next<V>());
    }
    return m;
  }
};

template <class K, class V, class H, class E, class A>
struct NodeTraits<std::unordered_map<K, V, H, E, A>> {
  static constexpr NodeKind kKind = NodeKind::kDict;
  using Children = std::tuple<V>;
  static bool Accepts(NodeKind k) { return IsDictKind(k); }
  template <class F>
  static void Visit(const std::unordered_map<K, V, H, E, A>& m, F&& f) {
    // Hash order is not stable across runs or libraries: visit in key order.
    std::vector<const typename std::unordered_map<K, V, H, E, A>::value_type*> entries;
    entries.reserve(m.size());
    for (const auto& kv : m) entries.push_back(&kv);
    std::sort(entries.begin(), entries.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    for (const auto* kv : entries) f(kv->first, kv->second);
  }
  template <class B>
  static std::unordered_map<K, V, H, E, A> Build(B& b) {
    std::unordered_map<K, V, H, E, A> m;
    m.reserve(b.size());
    for (std::size_t k = 0; k < b.size(); ++k) {
      K key = b.template Key<K>(k);
      m.emplace(std::move(key), b.template Next<V>());
    }
    return m;
  }
};

// ---- Leaf type deduction ----------------------------------------------------

// Marks a type (or tuple of types) that holds no leaves.
struct NoLeaves {};
// Marks leaves of different C++ types (Flatten then needs FlattenAs<L>).
struct MixedLeaves {};

namespace internal {

template <class L>
using WithNone = std::conditional_t<LeafTraits<L>::kHasNone, L, std::optional<L>>;

// Joins two leaf types: equal types, or T with its None-holding form
// (float and std::optional<float> join to std::optional<float>).
template <class A, class B>
struct JoinLeaf {
  using type =
      std::conditional_t<std::is_same_v<A, B> || std::is_same_v<A, WithNone<B>>, A,
                         std::conditional_t<std::is_same_v<B, WithNone<A>>, B, MixedLeaves>>;
};
template <>
struct JoinLeaf<MixedLeaves, MixedLeaves> {
  using type = MixedLeaves;
};
template <class B>
struct JoinLeaf<MixedLeaves, B> {
  using type = MixedLeaves;
};
template <class A>
struct JoinLeaf<A, MixedLeaves> {
  using type = MixedLeaves;
};
template <class B>
struct JoinLeaf<NoLeaves, B> {
  using type = B;
};
template <class A>
struct JoinLeaf<A, NoLeaves> {
  using type = A;
};
template <>
struct JoinLeaf<NoLeaves, NoLeaves> {
  using type = NoLeaves;
};

}  // namespace internal

// The leaf type of X: the one C++ type of all its leaves, NoLeaves or MixedLeaves.
template <class X, class = void>
struct LeafTypeOf {
  using type = X;
};
template <class T>
struct LeafTypeOf<Tree<T>> {
  using type = T;
};
template <class Y>
struct LeafTypeOf<std::optional<Y>> {
  using Inner = typename LeafTypeOf<Y>::type;
  using type =
      std::conditional_t<std::is_same_v<Inner, NoLeaves> || std::is_same_v<Inner, MixedLeaves>,
                         Inner, internal::WithNone<Inner>>;
};
template <class X>
struct LeafTypeOf<X, std::enable_if_t<kIsNode<X> && !IsTree<X>::value>> {
 private:
  template <class Tuple>
  struct Join;
  template <class... Ys>
  struct Join<std::tuple<Ys...>> {
    using type = NoLeaves;
  };
  template <class Y, class... Ys>
  struct Join<std::tuple<Y, Ys...>> {
    using type = typename internal::JoinLeaf<typename LeafTypeOf<std::decay_t<Y>>::type,
                                             typename Join<std::tuple<Ys...>>::type>::type;
  };

 public:
  using type = typename Join<typename NodeTraits<X>::Children>::type;
};
template <class X>
using LeafTypeOfT = typename LeafTypeOf<X>::type;

}  // namespace cpytree

#endif  // CPYTREE_TRAITS_H_
