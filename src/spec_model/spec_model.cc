// What a spec node means in torch's terms: its `type` and `context`, and the
// TreeSpec(type, context, children_specs) constructor that goes the other way.
#include "spec_model/spec_model.h"

#include <string>
#include <vector>

#include "ground/children.h"
#include "ground/intern.h"
#include "ground/registry.h"
#include "ground/spec_object.h"
#include "spec_model/torch_interop.h"

namespace cpytree {
namespace {

PyObject* NewRef(PyObject* o) {
  Py_INCREF(o);
  return o;
}

PyObject* KeyList(PyObject* const* keys, std::uint32_t n) {
  PyObject* list = PyList_New(n);
  if (list == nullptr) return nullptr;
  for (std::uint32_t k = 0; k < n; ++k) PyList_SET_ITEM(list, k, NewRef(keys[k]));
  return list;
}

// Appends the nodes and items of engine spec `spec` to `b` (a whole child
// subtree) and adds its leaf and node counts to *leaves and *count.
void AppendSpec(TraversalArena* b, PyObject* spec, std::int64_t* leaves, std::int64_t* count) {
  const TreeSpecObject* s = reinterpret_cast<const TreeSpecObject*>(spec);
  SpecView c = ViewOf(s);
  internal::AppendSubtree(c.nodes, c.num_nodes, b->items.size(),
                          [b](const Node& n) { b->nodes.push_back(n); });
  for (PyObject* item : *s->items) b->AddItem(NewRef(item));
  *leaves += c.root().num_leaves;
  *count += c.num_nodes;
}

}  // namespace

// The kind a constructor `type` argument denotes.
NodeKind KindOfType(PyObject* type) {
  if (type == reinterpret_cast<PyObject*>(&PyTuple_Type)) return NodeKind::kTuple;
  if (type == reinterpret_cast<PyObject*>(&PyList_Type)) return NodeKind::kList;
  if (type == reinterpret_cast<PyObject*>(&PyDict_Type)) return NodeKind::kDict;
  if (type == g_builtins.namedtuple_fn) return NodeKind::kNamedTuple;
  if (type == g_builtins.ordered_dict) return NodeKind::kOrderedDict;
  if (type == g_builtins.defaultdict) return NodeKind::kDefaultDict;
  if (type == g_builtins.deque) return NodeKind::kDeque;
  return NodeKind::kCustom;
}

namespace {

// Appends the keys of a dict-kind context to `b`; checks there is one per child.
bool AddKeys(TraversalArena* b, PyObject* type, PyObject* keys, Py_ssize_t arity) {
  Ref fast(PySequence_Fast(keys, "TreeSpec: the keys of a dict node must be a list"));
  if (!fast) return false;
  Ref seq(FrozenSequence(fast.get()));  // key __hash__ below may mutate the list
  if (!seq) return false;
  if (PySequence_Fast_GET_SIZE(seq.get()) != arity) {
    PyErr_Format(PyExc_ValueError,
                 "TreeSpec: a %R node with %zd children needs %zd keys in its context, got %R",
                 type, arity, arity, keys);
    return false;
  }
  for (Py_ssize_t k = 0; k < arity; ++k) {
    PyObject* key = PySequence_Fast_ITEMS(seq.get())[k];
    if (PyObject_Hash(key) == -1) return false;  // dict keys must be hashable
    b->AddItem(NewRef(key));
  }
  return true;
}

}  // namespace

// Appends the root's own context items (pre-order: before the children's).
bool AddRootItems(TraversalArena* b, NodeKind kind, PyObject* type, PyObject* context,
                  Py_ssize_t arity) {
  switch (kind) {
    case NodeKind::kTuple:
    case NodeKind::kList:
      if (context != Py_None) {
        PyErr_Format(PyExc_ValueError, "TreeSpec: a %R node has no context, got %R", type, context);
        return false;
      }
      return true;
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
      return AddKeys(b, type, context, arity);
    case NodeKind::kDefaultDict: {
      PyObject* factory = nullptr;
      PyObject* given = context;  // for the message
      Ref frozen;
      if (ft::kFreeThreaded && PyList_Check(context)) {  // another thread may resize it
        frozen = Ref(PyList_AsTuple(context));
        if (!frozen) return false;
        context = frozen.get();
      }
      if ((PyList_Check(context) || PyTuple_Check(context)) &&
          PySequence_Fast_GET_SIZE(context) == 2) {
        factory = PySequence_Fast_ITEMS(context)[0];
      }
      if (factory == nullptr || (factory != Py_None && !PyCallable_Check(factory))) {
        PyErr_Format(PyExc_ValueError,
                     "TreeSpec: a defaultdict context is [default_factory, keys] with a "
                     "callable or None default_factory, got %R",
                     given);
        return false;
      }
      b->AddItem(NewRef(factory));
      return AddKeys(b, type, PySequence_Fast_ITEMS(context)[1], arity);
    }
    case NodeKind::kNamedTuple: {
      int ok =
          PyType_Check(context) ? IsNamedTupleClass(reinterpret_cast<PyTypeObject*>(context)) : 0;
      if (ok < 0) return false;
      if (!ok) {
        PyErr_Format(PyExc_ValueError,
                     "TreeSpec: a namedtuple node's context is its namedtuple class, got %R",
                     context);
        return false;
      }
      b->AddItem(NewRef(context));
      return true;
    }
    case NodeKind::kDeque: {
      // Any int >= 0, as torch and the reference allow: a maxlen past C long
      // is kept (deque() itself raises OverflowError on unflatten, as torch's).
      bool ok = context == Py_None;
      if (!ok && PyLong_Check(context) && !PyBool_Check(context)) {
        int overflow = 0;
        long v = PyLong_AsLongAndOverflow(context, &overflow);
        ok = overflow > 0 || (overflow == 0 && v >= 0);
      }
      if (!ok) {
        if (PyErr_Occurred()) return false;
        PyErr_Format(PyExc_ValueError,
                     "TreeSpec: a deque node's context is its maxlen (None or an int >= 0), "
                     "got %R",
                     context);
        return false;
      }
      b->AddItem(NewRef(context));
      return true;
    }
    default:
      b->AddItem(NewRef(type));
      b->AddItem(NewRef(context));
      return true;
  }
}

PyObject* NodeType(SpecView v, std::int64_t i) {
  const Node& n = v.nodes[i];
  switch (n.kind) {
    case NodeKind::kLeaf:
      return NewRef(Py_None);
    case NodeKind::kTuple:
      return NewRef(reinterpret_cast<PyObject*>(&PyTuple_Type));
    case NodeKind::kList:
      return NewRef(reinterpret_cast<PyObject*>(&PyList_Type));
    case NodeKind::kDict:
      return NewRef(reinterpret_cast<PyObject*>(&PyDict_Type));
    case NodeKind::kNamedTuple:
      return NewRef(g_builtins.namedtuple_fn);
    case NodeKind::kOrderedDict:
      return NewRef(g_builtins.ordered_dict);
    case NodeKind::kDefaultDict:
      return NewRef(g_builtins.defaultdict);
    case NodeKind::kDeque:
      return NewRef(g_builtins.deque);
    case NodeKind::kCustom:
      return NewRef(v.items[n.ctx]);
  }
  CPYTREE_CHECK(false, nullptr);
}

PyObject* NodeContext(SpecView v, std::int64_t i) {
  const Node& n = v.nodes[i];
  PyObject* const* items = v.items + n.ctx;
  switch (n.kind) {
    case NodeKind::kLeaf:
    case NodeKind::kTuple:
    case NodeKind::kList:
      return NewRef(Py_None);
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
      return KeyList(items, n.arity);
    case NodeKind::kDefaultDict: {
      Ref keys(KeyList(items + 1, n.arity));
      if (!keys) return nullptr;
      return Py_BuildValue("[OO]", items[0], keys.get());
    }
    case NodeKind::kNamedTuple:
    case NodeKind::kDeque:
      return NewRef(items[0]);
    case NodeKind::kCustom:
      return NewRef(items[1]);
  }
  CPYTREE_CHECK(false, nullptr);
}

PyObject* MakeSpec(PyObject* type, PyObject* context, PyObject* children) {
  Ref fast(PySequence_Fast(children, "TreeSpec: children_specs must be a list of TreeSpec"));
  if (!fast) return nullptr;
  // Checked to hold specs below, then read after user code (key __hash__) ran.
  Ref seq(FrozenSequence(fast.get()));
  if (!seq) return nullptr;
  Py_ssize_t arity = PySequence_Fast_GET_SIZE(seq.get());
  if (type == Py_None) {
    if (context != Py_None) {
      PyErr_SetString(PyExc_AssertionError, "leaf node should not have a context");
      return nullptr;
    }
    if (arity != 0) {
      PyErr_SetString(PyExc_AssertionError, "leaf node should not have children");
      return nullptr;
    }
    return NewRef(LeafSpec());
  }
  // Children may be torch specs (install()): hold engine versions of all.
  Ref kids(PyList_New(arity));
  if (!kids) return nullptr;
  for (Py_ssize_t k = 0; k < arity; ++k) {
    PyObject* child = PySequence_Fast_ITEMS(seq.get())[k];
    PyObject* engine_child = IsAnySpec(child) ? CoerceSpec(child, "a child spec") : nullptr;
    if (engine_child == nullptr) {
      if (!PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "TreeSpec: expected a list of TreeSpec children, got %R",
                     children);
      }
      return nullptr;
    }
    PyList_SET_ITEM(kids.get(), k, engine_child);
  }
  seq = std::move(kids);
  NodeKind kind = KindOfType(type);
  TraversalArena b;
  if (!AddRootItems(&b, kind, type, context, arity)) return nullptr;
  std::int64_t leaves = 0, count = 1;
  for (Py_ssize_t k = 0; k < arity; ++k) {
    AppendSpec(&b, PySequence_Fast_ITEMS(seq.get())[k], &leaves, &count);
  }
  b.nodes.push_back(internal::MakeNode(kind, static_cast<std::uint32_t>(arity), 0, leaves, count));
  return InternView(b.View());
}

// One torch node being converted: its children (a private snapshot) and
// what its engine node needs once they are all appended.
struct TorchFrame {
  Ref children;     // tuple of the node's `_children`
  Py_ssize_t next;  // the next child to convert
  NodeKind kind;
  std::uint32_t ctx;  // index of the node's first item (pre-order)
  std::int64_t leaves;
  std::int64_t count;
};

PyObject* FromTorchSpec(PyObject* root) {
  const int limit = IterativeDepthLimit();
  TraversalArena b;  // releases the items taken so far on any error
  std::vector<TorchFrame> stack;
  std::int64_t root_leaves = 0, root_count = 0;  // totals of a root emitted whole
  // Emits `obj` whole (an engine spec or a torch leaf) or opens its frame.
  auto enter = [&](PyObject* obj) -> bool {
    std::int64_t* leaves = stack.empty() ? &root_leaves : &stack.back().leaves;
    std::int64_t* count = stack.empty() ? &root_count : &stack.back().count;
    if (IsTreeSpec(obj)) {
      AppendSpec(&b, obj, leaves, count);
      return true;
    }
    if (!IsTorchSpec(obj)) {
      PyErr_Format(PyExc_TypeError,
                   "Expected a child spec to be an instance of PyTreeSpec but got item of "
                   "type %R.",
                   reinterpret_cast<PyObject*>(Py_TYPE(obj)));
      return false;
    }
    Ref type(PyObject_GetAttrString(obj, "type"));
    if (!type) return false;
    if (type.get() == Py_None) {
      b.nodes.push_back(
          internal::MakeNode(NodeKind::kLeaf, 0, static_cast<std::uint32_t>(b.items.size()), 1, 1));
      *leaves += 1;
      *count += 1;
      return true;
    }
    if (static_cast<std::size_t>(limit) <= stack.size()) {
      RaiseDepthError("converting a torch TreeSpec", limit);
      return false;
    }
    Ref context(PyObject_GetAttrString(obj, "_context"));
    if (!context) return false;
    Ref children(PyObject_GetAttrString(obj, "_children"));
    if (!children) return false;
    Ref seq(PySequence_Tuple(children.get()));  // user code may change the list later
    if (!seq) return false;
    Py_ssize_t arity = PyTuple_GET_SIZE(seq.get());
    if (arity > static_cast<Py_ssize_t>(UINT32_MAX)) {
      PyErr_NoMemory();
      return false;
    }
    NodeKind kind = KindOfType(type.get());
    auto ctx = static_cast<std::uint32_t>(b.items.size());
    if (!AddRootItems(&b, kind, type.get(), context.get(), arity)) return false;
    stack.push_back(TorchFrame{std::move(seq), 0, kind, ctx, 0, 1});
    return true;
  };
  if (!enter(root)) return nullptr;
  while (!stack.empty()) {
    TorchFrame& f = stack.back();
    if (f.next < PyTuple_GET_SIZE(f.children.get())) {
      PyObject* child = PyTuple_GET_ITEM(f.children.get(), f.next++);  // held by f.children
      if (!enter(child)) return nullptr;  // may grow the stack: f is not used after
      continue;
    }
    Node n =
        internal::MakeNode(f.kind, static_cast<std::uint32_t>(PyTuple_GET_SIZE(f.children.get())),
                           f.ctx, f.leaves, f.count);
    b.nodes.push_back(n);
    stack.pop_back();
    if (!stack.empty()) {
      stack.back().leaves += n.num_leaves;
      stack.back().count += n.num_nodes;
    }
  }
  if (b.nodes.size() == 1 && b.nodes[0].kind == NodeKind::kLeaf) return NewRef(LeafSpec());
  return InternView(b.View());
}

PyObject* CoerceSpec(PyObject* obj, const char* what) {
  if (IsTreeSpec(obj)) {
    Py_INCREF(obj);
    return obj;
  }
  if (IsTorchSpec(obj)) return FromTorchSpec(obj);
  PyErr_Format(PyExc_TypeError,
               "Expected %s to be an instance of PyTreeSpec but got item of type %R.", what,
               reinterpret_cast<PyObject*>(Py_TYPE(obj)));
  return nullptr;
}

}  // namespace cpytree
