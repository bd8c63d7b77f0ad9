// The Python TreeSpec type: attributes, equality, hashing, repr, pickling and
// the TreeSpec(type, context, children_specs) constructor.
#include "treespec.h"

#include <algorithm>
#include <string>

#include "base/args.h"
#include "ground/children.h"
#include "ground/intern.h"
#include "ground/registry.h"
#include "spec_model/spec_compare.h"
#include "spec_model/spec_model.h"
#include "spec_model/torch_interop.h"
#include "traversals/spec_walk.h"
#include "traversals/unflatten.h"

namespace cpytree {
namespace {

TreeSpecObject* AsSpec(PyObject* o) { return reinterpret_cast<TreeSpecObject*>(o); }

// ---------------------------------------------------------------- lifetime

void SpecDealloc(PyObject* self) {
  TreeSpecObject* s = AsSpec(self);
  PyObject_GC_UnTrack(self);
  // Out of the intern table at once: the trashcan below may defer the rest,
  // and a lookup must not find a spec whose count already reached zero.
  ForgetSpec(s);
  if (s->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  // A context may hold a spec whose context holds a spec...: freeing a long
  // chain must not recurse once per link on the C stack (the trashcan defers
  // deep deallocations, as CPython's own containers do).
  Py_TRASHCAN_BEGIN(self, SpecDealloc) if (s->items != nullptr) {
    for (PyObject* o : *s->items) Py_DECREF(o);
    delete s->items;
  }
  delete s->nodes;
  Py_TYPE(self)->tp_free(self);
  Py_TRASHCAN_END
}

int SpecTraverse(PyObject* self, visitproc visit, void* arg) {
  TreeSpecObject* s = AsSpec(self);
  if (s->items != nullptr) {
    for (PyObject* o : *s->items) Py_VISIT(o);
  }
  return 0;
}

// ---------------------------------------------------------------- accessors

PyObject* GetType(PyObject* self, void*) {
  return NodeType(ViewOf(AsSpec(self)), AsSpec(self)->nodes->size() - 1);
}
PyObject* GetContext(PyObject* self, void*) {
  return NodeContext(ViewOf(AsSpec(self)), AsSpec(self)->nodes->size() - 1);
}
PyObject* GetNumNodes(PyObject* self, void*) {
  return PyLong_FromLongLong(ViewOf(AsSpec(self)).root().num_nodes);
}
PyObject* GetNumLeaves(PyObject* self, void*) {
  return PyLong_FromLongLong(ViewOf(AsSpec(self)).root().num_leaves);
}
PyObject* GetNumChildren(PyObject* self, void*) {
  return PyLong_FromUnsignedLong(ViewOf(AsSpec(self)).root().arity);
}

// The child specs of the root, first child first. New list.
PyObject* ChildrenList(PyObject* self) {
  SpecView v = ViewOf(AsSpec(self));
  std::vector<std::int64_t> idx;
  internal::ChildIndices(v.nodes, v.root_index(), &idx);
  Ref out(PyList_New(static_cast<Py_ssize_t>(idx.size())));
  if (!out) return nullptr;
  for (std::size_t k = 0; k < idx.size(); ++k) {
    PyObject* child = InternView(SpecView{v.nodes + internal::SubtreeBegin(v.nodes, idx[k]),
                                          v.nodes[idx[k]].num_nodes, v.items});
    if (child == nullptr) return nullptr;
    PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(k), child);
  }
  return out.release();
}

PyObject* GetChildrenSpecs(PyObject* self, void*) {
  if (PyErr_WarnEx(PyExc_FutureWarning,
                   "`treespec.children_specs` is deprecated. Use `treespec.child(index)` to "
                   "access a single child, or `treespec.children()` to get all children.",
                   1) < 0) {
    return nullptr;
  }
  return ChildrenList(self);
}

PyObject* MethodChildren(PyObject* self, PyObject*) { return ChildrenList(self); }

PyObject* MethodChild(PyObject* self, PyObject* arg) {
  Py_ssize_t index = PyNumber_AsSsize_t(arg, PyExc_IndexError);
  if (index == -1 && PyErr_Occurred()) return nullptr;
  SpecView v = ViewOf(AsSpec(self));
  Py_ssize_t n = v.root().arity;
  if (index < 0) index += n;
  if (index < 0 || index >= n) {
    PyErr_SetString(PyExc_IndexError, "list index out of range");
    return nullptr;
  }
  std::vector<std::int64_t> idx;
  internal::ChildIndices(v.nodes, v.root_index(), &idx);
  std::int64_t c = idx[static_cast<std::size_t>(index)];
  return InternView(
      SpecView{v.nodes + internal::SubtreeBegin(v.nodes, c), v.nodes[c].num_nodes, v.items});
}

PyObject* MethodIsLeaf(PyObject* self, PyObject*) {
  const Node& root = ViewOf(AsSpec(self)).root();
  return PyBool_FromLong(root.num_nodes == 1 && root.num_leaves == 1);
}

PyObject* MethodUnflatten(PyObject* self, PyObject* leaves) {
  return UnflattenChecked(self, leaves);
}

PyObject* MethodFlatten(PyObject* self, PyObject* tree) { return SpecFlatten(self, tree); }

PyObject* MethodFlattenUpTo(PyObject* self, PyObject* tree) { return SpecFlattenUpTo(self, tree); }

// (type, context, children) of the root, as torch's constructor takes them.
PyObject* ConstructorArgs(PyObject* self) {
  SpecView v = ViewOf(AsSpec(self));
  Ref type(NodeType(v, v.root_index()));
  Ref context(NodeContext(v, v.root_index()));
  Ref children(v.root().kind == NodeKind::kLeaf ? PyList_New(0) : ChildrenList(self));
  if (!type || !context || !children) return nullptr;
  return PyTuple_Pack(3, type.get(), context.get(), children.get());
}

// Pickles as TreeSpec(type, context, children): portable across versions.
// While install() has handed torch's classes over, in torch's own form
// (TreeSpec(...), treespec_leaf()), so a pickle loads without cpytree.
PyObject* MethodReduce(PyObject* self, PyObject*) {
  bool leaf = ViewOf(AsSpec(self)).root().kind == NodeKind::kLeaf;
  bool as_torch = g_torch.as_torch && g_torch.tree_spec != nullptr;
  if (as_torch && leaf && g_torch.treespec_leaf != nullptr) {
    return Py_BuildValue("(O())", g_torch.treespec_leaf);
  }
  Ref args(ConstructorArgs(self));
  if (!args) return nullptr;
  PyObject* cls = as_torch ? g_torch.tree_spec : reinterpret_cast<PyObject*>(&TreeSpecType);
  return PyTuple_Pack(2, cls, args.get());
}

// Bytes owned by the spec: the object, its node array and its item array (the
// items themselves are shared Python objects: dict keys, classes, contexts).
PyObject* MethodSizeOf(PyObject* self, PyObject*) {
  TreeSpecObject* s = AsSpec(self);
  std::size_t bytes = Py_TYPE(self)->tp_basicsize + sizeof(std::vector<Node>) +
                      sizeof(std::vector<PyObject*>) + s->nodes->capacity() * sizeof(Node) +
                      s->items->capacity() * sizeof(PyObject*);
  return PyLong_FromSize_t(bytes);
}

PyObject* MethodCopy(PyObject* self, PyObject*) {
  Py_INCREF(self);  // immutable: a copy is the spec itself
  return self;
}

// Deep-copies the contexts (as torch does) and re-interns the result: always
// an engine spec, whatever form pickling uses.
PyObject* MethodDeepCopy(PyObject* self, PyObject* memo) {
  if (ViewOf(AsSpec(self)).root().kind == NodeKind::kLeaf) return MethodCopy(self, nullptr);
  Ref copy_mod(PyImport_ImportModule("copy"));
  Ref args(copy_mod ? ConstructorArgs(self) : nullptr);
  if (!args) return nullptr;
  Ref copied(PyObject_CallMethod(copy_mod.get(), "deepcopy", "OO", args.get(), memo));
  if (!copied) return nullptr;
  return PyObject_Call(reinterpret_cast<PyObject*>(&TreeSpecType), copied.get(), nullptr);
}

// ---------------------------------------------------------------- protocols

PyObject* SpecReprMethod(PyObject* self) { return SpecRepr(ViewOf(AsSpec(self))); }

// The internal hash behind the O(1) `!=`: equal specs always agree on it
// (torch's own hash does not quite: it hashes custom types by identity while
// == compares their str).
Py_hash_t EqHash(PyObject* self) {
  TreeSpecObject* s = AsSpec(self);
  Py_hash_t cached = ft::LoadRelaxed(&s->eq_hash);  // threads may fill it at once: same value
  if (cached == -1) {
    cached = SpecEqHash(ViewOf(s));
    if (cached == -1) return -1;
    ft::StoreRelaxed(&s->eq_hash, cached);
  }
  return cached;
}

// hash(spec): torch's value, computed once.
Py_hash_t SpecHash(PyObject* self) {
  TreeSpecObject* s = AsSpec(self);
  Py_hash_t cached = ft::LoadRelaxed(&s->torch_hash);  // as EqHash's
  if (cached == -1) {
    cached = SpecTorchHash(ViewOf(s));
    if (cached == -1) return -1;
    ft::StoreRelaxed(&s->torch_hash, cached);
  }
  return cached;
}

PyObject* SpecRichCompare(PyObject* a, PyObject* b, int op) {
  if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
  Ref converted;
  if (!IsTreeSpec(b)) {
    if (!IsTorchSpec(b)) Py_RETURN_NOTIMPLEMENTED;
    // A torch spec: compared here, iteratively, not by torch's reflected
    // __eq__ (recursive: the fuzzer's torch mode met its RecursionError on
    // chains the engine handles). One the engine cannot convert (a hostile
    // context, nesting past the limit) is left to torch's __eq__: torch's
    // answer (a 10-deep spec != a 100,000-deep one) or torch's error.
    converted = Ref(FromTorchSpec(b));
    if (!converted) {
      if (!PyErr_ExceptionMatches(PyExc_Exception)) return nullptr;
      PyErr_Clear();
      Py_RETURN_NOTIMPLEMENTED;
    }
    b = converted.get();
  }
  int eq;
  if (a == b) {
    eq = 1;
  } else {
    // Equal specs hash equally: unequal hashes decide in O(1). Interning makes
    // "same structure" the pointer case above, so the full comparison runs
    // only for specs torch calls equal that are not identical (1 vs 1.0 keys).
    Py_hash_t ha = EqHash(a), hb = EqHash(b);
    if (ha == -1 || hb == -1) return nullptr;
    eq = ha != hb ? 0 : SpecsEqual(ViewOf(AsSpec(a)), ViewOf(AsSpec(b)));
    if (eq < 0) return nullptr;
  }
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

// TreeSpec(type, context, children_specs): the torch constructor.
PyObject* SpecNew(PyTypeObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"type", "context", "children_specs", nullptr};
  PyObject *type, *context, *children;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:TreeSpec", const_cast<char**>(kwlist), &type,
                                   &context, &children)) {
    return nullptr;
  }
  return MakeSpec(type, context, children);
}

// Methods taking one argument, positional or by keyword as in torch
// (`spec.unflatten(leaves=...)`), forwarded to a METH_O implementation.
template <PyObject* (*Impl)(PyObject*, PyObject*), const char* const* kName>
PyObject* OneArg(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[1] = {nullptr};
  if (!ParseArgs(kName[0], args, nargs, kwnames, kName, 1, 1, a)) return nullptr;
  return Impl(self, a[0]);
}
constexpr const char* kIndex[] = {"index"};
constexpr const char* kLeaves[] = {"leaves"};
constexpr const char* kTree[] = {"tree"};

// __repr__(self, indent=0), torch's signature; repr() uses tp_repr.
PyObject* MethodRepr(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const kNames[] = {"indent"};
  PyObject* a[1] = {nullptr};
  if (!ParseArgs("__repr__", args, nargs, kwnames, kNames, 1, 0, a)) return nullptr;
  int indent = 0;
  if (a[0] != nullptr) {
    // torch indents with " " * indent: nothing for n <= 0, MemoryError for
    // absurd sizes (OverflowError past Py_ssize_t, as Python's).
    Py_ssize_t n = PyLong_AsSsize_t(a[0]);
    if (n == -1 && PyErr_Occurred()) return nullptr;
    if (n > (1 << 30)) return PyErr_NoMemory();
    indent = static_cast<int>(n < -(1 << 30) ? -(1 << 30) : n);
  }
  return SpecRepr(ViewOf(AsSpec(self)), indent);
}

// Every method and slot is CPYTREE_GUARDED (common.h): no C++ exception
// reaches CPython.

// __class__: torch's TreeSpec/LeafSpec while install() has handed them over
// (isinstance in torch code then accepts engine specs), else the real type.
PyObject* GetClass(PyObject* self, void*) {
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(self));
  if (g_torch.tree_spec != nullptr) {
    bool leaf = ViewOf(AsSpec(self)).root().kind == NodeKind::kLeaf;
    cls = leaf && g_torch.leaf_spec != nullptr ? g_torch.leaf_spec : g_torch.tree_spec;
  }
  Py_INCREF(cls);
  return cls;
}

PyObject* GetChildrenPrivate(PyObject* self, void*) { return ChildrenList(self); }

PyGetSetDef kGetSet[] = {
    {"type", CPYTREE_GUARDED(GetType), nullptr, "The type of the root node (None for a leaf).",
     nullptr},
    {"context", CPYTREE_GUARDED(GetContext), nullptr, "The context of the root node.", nullptr},
    {"num_nodes", CPYTREE_GUARDED(GetNumNodes), nullptr, "Number of nodes in the tree.", nullptr},
    {"num_leaves", CPYTREE_GUARDED(GetNumLeaves), nullptr, "Number of leaves in the tree.",
     nullptr},
    {"num_children", CPYTREE_GUARDED(GetNumChildren), nullptr, "Number of children of the root.",
     nullptr},
    {"children_specs", CPYTREE_GUARDED(GetChildrenSpecs), nullptr, "Deprecated: use children().",
     nullptr},
    {"_context", CPYTREE_GUARDED(GetContext), nullptr, "torch's private name of context.", nullptr},
    {"_children", CPYTREE_GUARDED(GetChildrenPrivate), nullptr,
     "torch's private list of child specs.", nullptr},
    {"__class__", CPYTREE_GUARDED(GetClass), nullptr,
     "torch's TreeSpec class while install() is active.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef kMethods[] = {
    {"children", CPYTREE_GUARDED(MethodChildren), METH_NOARGS,
     "children($self, /)\n--\n\nAll child specs."},
    {"child", CPYTREE_GUARDED((OneArg<MethodChild, kIndex>)), METH_FASTCALL | METH_KEYWORDS,
     "child($self, index)\n--\n\nThe child spec at index."},
    {"is_leaf", CPYTREE_GUARDED(MethodIsLeaf), METH_NOARGS,
     "is_leaf($self, /)\n--\n\nWhether the spec is a leaf."},
    {"unflatten", CPYTREE_GUARDED((OneArg<MethodUnflatten, kLeaves>)),
     METH_FASTCALL | METH_KEYWORDS,
     "unflatten($self, leaves)\n--\n\nRebuild a pytree from its leaves."},
    {"flatten_up_to", CPYTREE_GUARDED((OneArg<MethodFlattenUpTo, kTree>)),
     METH_FASTCALL | METH_KEYWORDS,
     "flatten_up_to($self, tree)\n--\n\nThe subtrees of tree at this spec's leaves."},
    {"flatten", CPYTREE_GUARDED((OneArg<MethodFlatten, kTree>)), METH_FASTCALL | METH_KEYWORDS,
     "flatten($self, tree)\n--\n\nThe leaves of tree, whose structure must equal this "
     "spec\n(validated in the same pass; ValueError with the key path otherwise)."},
    {"__repr__", CPYTREE_GUARDED(MethodRepr), METH_FASTCALL | METH_KEYWORDS | METH_COEXIST,
     "__repr__($self, indent=0)\n--\n\nThe text torch prints, children indented by indent+2."},
    {"__reduce__", CPYTREE_GUARDED(MethodReduce), METH_NOARGS, nullptr},
    {"__copy__", CPYTREE_GUARDED(MethodCopy), METH_NOARGS, nullptr},
    {"__sizeof__", CPYTREE_GUARDED(MethodSizeOf), METH_NOARGS, nullptr},
    {"__deepcopy__", CPYTREE_GUARDED(MethodDeepCopy), METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

bool InitTreeSpecType() {
  TreeSpecType.tp_name = "cpytree.TreeSpec";
  TreeSpecType.tp_basicsize = sizeof(TreeSpecObject);
  TreeSpecType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  TreeSpecType.tp_doc =
      "TreeSpec(type, context, children_specs)\n--\n\n"
      "The structure of a pytree (interned and immutable).";
  TreeSpecType.tp_dealloc = SpecDealloc;
  TreeSpecType.tp_traverse = SpecTraverse;
  TreeSpecType.tp_repr = CPYTREE_GUARDED(SpecReprMethod);
  TreeSpecType.tp_hash = CPYTREE_GUARDED(SpecHash);
  TreeSpecType.tp_richcompare = CPYTREE_GUARDED(SpecRichCompare);
  TreeSpecType.tp_weaklistoffset = offsetof(TreeSpecObject, weakrefs);
  TreeSpecType.tp_getset = kGetSet;
  TreeSpecType.tp_methods = kMethods;
  TreeSpecType.tp_new = CPYTREE_GUARDED(SpecNew);
  if (PyType_Ready(&TreeSpecType) < 0) return false;
  return InternLeafSpec();
}

}  // namespace cpytree
