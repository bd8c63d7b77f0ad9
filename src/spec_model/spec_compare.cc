// torch's observable behaviour of a spec as a value: repr text, structural
// equality and a hash consistent with it.
#include "spec_model/spec_compare.h"

#include <cstdint>
#include <string>
#include <vector>

#include "base/key_equal.h"
#include "cpytree/internal/hash_mix.h"
#include "ground/registry.h"
#include "ground/spec_object.h"
#include "spec_model/spec_model.h"
#include "spec_model/torch_interop.h"

namespace cpytree {
namespace {

// Appends str(o) as UTF-8.
bool AppendStr(std::string* out, PyObject* o) {
  Ref s(PyObject_Str(o));
  if (!s) return false;
  Py_ssize_t n;
  const char* utf8 = PyUnicode_AsUTF8AndSize(s.get(), &n);
  if (utf8 == nullptr) return false;
  out->append(utf8, n);
  return true;
}

bool AppendTypeName(std::string* out, SpecView v, std::int64_t i) {
  const char* builtin = BuiltinTypeName(v.nodes[i].kind);
  if (builtin != nullptr) {
    out->append(builtin);
    return true;
  }
  Ref name(PyObject_GetAttrString(v.items[v.nodes[i].ctx], "__name__"));
  return name && AppendStr(out, name.get());
}

// torch: TreeSpec(<type.__name__>, <context>, [<child>,\n<indent><child>...])
bool ReprNode(std::string* out, SpecView v, std::int64_t i, int indent, int depth,
              const DepthBound& limit) {
  const Node& n = v.nodes[i];
  if (n.kind == NodeKind::kLeaf) {
    out->push_back('*');
    return true;
  }
  if (limit.Exceeded(depth)) {
    RaiseDepthError("TreeSpec repr", limit.Reached(depth));
    return false;
  }
  out->append("TreeSpec(");
  if (!AppendTypeName(out, v, i)) return false;
  out->append(", ");
  Ref context(NodeContext(v, i));
  if (!context || !AppendStr(out, context.get())) return false;
  out->append(", [");
  std::vector<std::int64_t> children;
  internal::ChildIndices(v.nodes, i, &children);
  indent += 2;
  for (std::size_t k = 0; k < children.size(); ++k) {
    if (k > 0) {
      out->append(",\n");
      if (indent > 0) out->append(static_cast<std::size_t>(indent), ' ');
    }
    if (!ReprNode(out, v, children[k], indent, depth + 1, limit)) return false;
  }
  out->append("])");
  return true;
}

// torch compares contexts with `!=`; the keys of dict kinds as lists.
int ItemsEqual(PyObject* const* a, PyObject* const* b, std::size_t n) {
  for (std::size_t k = 0; k < n; ++k) {
    if (a[k] == b[k]) continue;
    int eq = KeyEquals(a[k], b[k]);
    if (eq <= 0) return eq;
  }
  return 1;
}

// str(type) of a custom node's type: what torch's == compares.
int SameTypeText(PyObject* a, PyObject* b) {
  if (a == b) return 1;
  Ref sa(PyObject_Str(a)), sb(PyObject_Str(b));
  if (!sa || !sb) return -1;
  return PyObject_RichCompareBool(sa.get(), sb.get(), Py_EQ);
}

// CPython's tuple hash (Objects/tupleobject.c since 3.8, xxHash-based) over
// item hashes already computed: hash((a, b, c)) without building the tuple.
Py_hash_t TupleHash(const Py_hash_t* items, std::size_t n) {
  constexpr std::uint64_t kPrime1 = 11400714785074694791ULL;
  constexpr std::uint64_t kPrime2 = 14029467366897019727ULL;
  constexpr std::uint64_t kPrime5 = 2870177450012600261ULL;
  std::uint64_t acc = kPrime5;
  for (std::size_t k = 0; k < n; ++k) {
    acc += static_cast<std::uint64_t>(items[k]) * kPrime2;
    acc = (acc << 31) | (acc >> 33);
    acc *= kPrime1;
  }
  acc += n ^ (kPrime5 ^ 3527539UL);
  if (acc == static_cast<std::uint64_t>(-1)) return 1546275796;
  return static_cast<Py_hash_t>(acc);
}

PyObject* g_constant_types = nullptr;  // classes whose context hashes by .value

// torch's `hashable_context` of node i, hashed.
Py_hash_t ContextHash(SpecView v, std::int64_t i) {
  const Node& n = v.nodes[i];
  PyObject* const* items = v.items + n.ctx;
  auto key_tuple_hash = [&](PyObject* const* keys) -> Py_hash_t {
    std::vector<Py_hash_t> hashes(n.arity);
    for (std::uint32_t k = 0; k < n.arity; ++k) {
      hashes[k] = PyObject_Hash(keys[k]);
      if (hashes[k] == -1) return -1;
    }
    return TupleHash(hashes.data(), hashes.size());
  };
  switch (n.kind) {
    case NodeKind::kLeaf:
    case NodeKind::kTuple:
    case NodeKind::kList:
      return PyObject_Hash(Py_None);
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
      return key_tuple_hash(items);  // tuple(keys)
    case NodeKind::kDefaultDict: {   // (default_factory, tuple(keys))
      Py_hash_t pair[2] = {PyObject_Hash(items[0]), key_tuple_hash(items + 1)};
      if (pair[0] == -1 || pair[1] == -1) return -1;
      return TupleHash(pair, 2);
    }
    case NodeKind::kNamedTuple:
    case NodeKind::kDeque:
      return PyObject_Hash(items[0]);  // the raw context: the class / maxlen
    case NodeKind::kCustom: {
      // A constant's context hashes by its value; other custom contexts may
      // be unhashable, so torch leaves them out (hashes None). While specs
      // pose as torch's (g_torch.as_torch), only torch's ConstantNode counts,
      // as in torch's __hash__: an engine spec must hash like the torch spec
      // it equals (the fuzzer's torch mode found cpytree's ConstantNode
      // hashed by value here and None by torch). Not whether the classes are
      // set: they stay after uninstall(), and specs made before install()
      // must hash as they did once it is undone.
      PyObject* own = g_torch.as_torch ? nullptr : g_constant_types;
      for (PyObject* types : {own, g_torch.constant_node}) {
        if (types == nullptr) continue;
        int is_constant = PyObject_IsInstance(items[1], types);
        if (is_constant < 0) return -1;
        if (is_constant) {
          Ref value(PyObject_GetAttrString(items[1], "value"));
          return value ? PyObject_Hash(value.get()) : -1;
        }
      }
      return PyObject_Hash(Py_None);
    }
  }
  return -1;
}

}  // namespace

Py_hash_t SpecTorchHash(SpecView v) {
  std::vector<Py_hash_t> stack;  // hashes of finished subtrees
  for (std::int64_t i = 0; i < v.num_nodes; ++i) {
    const Node& n = v.nodes[i];
    Py_hash_t children = TupleHash(stack.data() + stack.size() - n.arity, n.arity);
    stack.resize(stack.size() - n.arity);
    Ref type(NodeType(v, i));
    if (!type) return -1;
    // hash((node_type, hashable_context, tuple(children_specs)))
    Py_hash_t parts[3] = {PyObject_Hash(type.get()), ContextHash(v, i), children};
    if (parts[0] == -1 || parts[1] == -1) return -1;
    stack.push_back(TupleHash(parts, 3));
  }
  return stack.back();
}

PyObject* PySetConstantTypes(PyObject*, PyObject* types) {
  if (!PyTuple_Check(types)) {
    PyErr_SetString(PyExc_TypeError, "_set_constant_types expects a tuple of classes");
    return nullptr;
  }
  ft::ReplaceSetting(&g_constant_types, types);
  Py_RETURN_NONE;
}

PyObject* SpecRepr(SpecView v, int indent) {
  std::string out;
  // Specs built with the constructor may be nested without bound: the limit
  // follows the C stack left, as the traversals' does.
  if (!ReprNode(&out, v, v.root_index(), indent, 0, DepthLimit())) return nullptr;
  return PyUnicode_FromStringAndSize(out.data(), static_cast<Py_ssize_t>(out.size()));
}

int SpecsEqual(SpecView a, SpecView b) {
  if (a.num_nodes != b.num_nodes) return 0;
  if (!internal::SameShape(a.nodes, b.nodes, a.num_nodes)) return 0;
  for (std::int64_t i = 0; i < a.num_nodes; ++i) {
    const Node& n = a.nodes[i];
    PyObject* const* ia = a.items + n.ctx;
    PyObject* const* ib = b.items + b.nodes[i].ctx;
    int eq = 1;
    if (n.kind == NodeKind::kCustom) {
      eq = SameTypeText(ia[0], ib[0]);
      if (eq == 1) {
        // torch: `if self._context != other._context: return False`
        int ne = PyObject_RichCompareBool(ia[1], ib[1], Py_NE);
        eq = ne < 0 ? -1 : !ne;
      }
    } else {
      eq = ItemsEqual(ia, ib, NumContextItems(n.kind, n.arity));
    }
    if (eq != 1) return eq;
  }
  return 1;
}

Py_hash_t SpecEqHash(SpecView v) {
  std::size_t h = static_cast<std::size_t>(v.num_nodes);
  for (std::int64_t i = 0; i < v.num_nodes; ++i) {
    const Node& n = v.nodes[i];
    h = internal::HashNodeShape(h, n);
    PyObject* const* items = v.items + n.ctx;
    if (n.kind == NodeKind::kCustom) {
      // torch ignores custom contexts when hashing; the type counts by its text.
      Ref text(PyObject_Str(items[0]));
      if (!text) return -1;
      Py_hash_t th = PyObject_Hash(text.get());
      if (th == -1) return -1;
      h = internal::HashMix(h, static_cast<std::size_t>(th));
      continue;
    }
    std::size_t count = NumContextItems(n.kind, n.arity);
    for (std::size_t k = 0; k < count; ++k) {
      Py_hash_t ih = PyObject_Hash(items[k]);
      if (ih == -1) {
        if (!PyErr_Occurred()) continue;
        PyErr_Clear();  // an unhashable context item does not take part
        continue;
      }
      h = internal::HashMix(h, static_cast<std::size_t>(ih));
    }
  }
  Py_hash_t out = static_cast<Py_hash_t>(h);
  return out == -1 ? -2 : out;
}

}  // namespace cpytree
