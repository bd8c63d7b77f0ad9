// Node kinds of a pytree spec, shared by the CPython engine (src/) and the
// header-only C++ library.
//
// A spec is a flat array of nodes in post-order (children before their parent,
// the root last). Each node has a kind; the kind says what the node rebuilds
// into and which context items it carries:
//
//   kLeaf         a leaf                         no items
//   kTuple/kList  tuple / list                   no items
//   kDict         dict, insertion order          one key per child
//   kNamedTuple   a namedtuple class instance    the class
//   kOrderedDict  collections.OrderedDict        one key per child
//   kDefaultDict  collections.defaultdict        default_factory, then the keys
//   kDeque        collections.deque              maxlen (None or int)
//   kCustom       a registered node type         the type, then the context
//
// Example:
//   static_assert(cpytree::NumContextItems(cpytree::NodeKind::kDict, 3) == 3);
#ifndef CPYTREE_KIND_H_
#define CPYTREE_KIND_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace cpytree {

// The kind of one spec node. Values are stable: they appear in memory layouts.
enum class NodeKind : std::uint8_t {
  kLeaf = 0,
  kTuple = 1,
  kList = 2,
  kDict = 3,
  kNamedTuple = 4,
  kOrderedDict = 5,
  kDefaultDict = 6,
  kDeque = 7,
  kCustom = 8,
};

inline constexpr int kNumNodeKinds = 9;

// True for the kinds whose children are keyed by dict keys.
constexpr bool IsDictKind(NodeKind kind) {
  return kind == NodeKind::kDict || kind == NodeKind::kOrderedDict ||
         kind == NodeKind::kDefaultDict;
}

// Number of context items a node of `kind` with `arity` children carries.
constexpr std::size_t NumContextItems(NodeKind kind, std::size_t arity) {
  switch (kind) {
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
      return arity;
    case NodeKind::kDefaultDict:
      return arity + 1;
    case NodeKind::kNamedTuple:
    case NodeKind::kDeque:
      return 1;
    case NodeKind::kCustom:
      return 2;
    default:
      return 0;
  }
}

// Index of the first dict key among a node's context items.
constexpr std::size_t FirstKeyItem(NodeKind kind) { return kind == NodeKind::kDefaultDict ? 1 : 0; }

// The names of each builtin kind's Python type, in one table: `type_name` is
// `type.__name__` (torch's TreeSpec repr), `serialized` the protocol-1
// "type" field (`module.qualname`, torch's serialized type name).
struct BuiltinKindNames {
  NodeKind kind;
  const char* type_name;
  const char* serialized;
};
inline constexpr BuiltinKindNames kBuiltinKindNames[] = {
    {NodeKind::kTuple, "tuple", "builtins.tuple"},
    {NodeKind::kList, "list", "builtins.list"},
    {NodeKind::kDict, "dict", "builtins.dict"},
    {NodeKind::kNamedTuple, "namedtuple", "collections.namedtuple"},
    {NodeKind::kOrderedDict, "OrderedDict", "collections.OrderedDict"},
    {NodeKind::kDefaultDict, "defaultdict", "collections.defaultdict"},
    {NodeKind::kDeque, "deque", "collections.deque"},
};
static_assert(std::size(kBuiltinKindNames) == kNumNodeKinds - 2,
              "one row per kind but kLeaf and kCustom");

// The name torch's TreeSpec repr uses for a builtin kind; nullptr for the others.
constexpr const char* BuiltinTypeName(NodeKind kind) {
  for (const BuiltinKindNames& row : kBuiltinKindNames) {
    if (row.kind == kind) return row.type_name;
  }
  return nullptr;
}

// The protocol-1 "type" of a builtin kind; nullptr for kLeaf and kCustom.
constexpr const char* SerializedTypeName(NodeKind kind) {
  for (const BuiltinKindNames& row : kBuiltinKindNames) {
    if (row.kind == kind) return row.serialized;
  }
  return nullptr;
}

// The builtin kind a protocol-1 "type" names, or kCustom for any other name.
constexpr NodeKind KindOfSerializedTypeName(std::string_view name) {
  for (const BuiltinKindNames& row : kBuiltinKindNames) {
    if (name == row.serialized) return row.kind;
  }
  return NodeKind::kCustom;
}

}  // namespace cpytree

#endif  // CPYTREE_KIND_H_
