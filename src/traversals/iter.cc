// tree_iter: a lazy iterator over the leaves of a pytree, in C.
//
// torch's tree_iter is a recursive Python generator: it visits a node only
// when the consumer asks for the next leaf, so `tree_any`/`tree_all` stop at
// the first answer, and is_leaf and custom flatten functions run only on the
// part of the tree consumed. This iterator keeps that contract with an
// explicit stack of frames (no C recursion, any depth up to the limit):
//
//   for leaf in cpytree.tree_iter(tree): ...     # same leaves as tree_leaves
//
// A frame holds the children of one node and the index of the next child.
// Children are read as torch's flatten functions give them: a list is
// iterated live (torch's _list_flatten returns the list itself); tuples and
// namedtuples are immutable; dict, OrderedDict, defaultdict and deque values
// are snapshotted when the node is entered (torch copies them there too);
// custom nodes call their flatten_fn when entered.
#include "traversals/iter.h"

#include <memory>
#include <vector>

#include "base/args.h"
#include "base/ft.h"
#include "ground/children.h"
#include "ground/registry.h"
#include "traversals/flatten.h"

namespace cpytree {
namespace {

// One node being iterated: its children (a list or tuple, owned) and the next index.
struct Frame {
  PyObject* children;
  Py_ssize_t next;
};

struct TreeIterObject {
  PyObject_HEAD PyObject* root;  // the tree before the first __next__ (owned), then null
  PyObject* is_leaf;             // the user's is_leaf (owned) or null
  // Heap-allocated so the object stays a C struct CPython can allocate.
  std::vector<Frame>* frames;
  int limit;  // maximum frames: deeper (or cyclic) trees raise RecursionError
  // Free-threaded builds: 1 while a thread is inside __next__ (atomic). A
  // second thread calling it meanwhile gets ValueError, as a generator's
  // caller does ("generator already executing"): the frames are one
  // thread's state.
  int running;
};

PyTypeObject TreeIterType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// Drops every reference the iterator holds: it is exhausted from now on.
void ClearState(TreeIterObject* it) {
  Py_CLEAR(it->root);
  if (it->frames != nullptr) {
    std::vector<Frame> frames;
    frames.swap(*it->frames);  // a decref below may re-enter this iterator
    for (Frame& f : frames) Py_DECREF(f.children);
  }
}

int IterTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* it = reinterpret_cast<TreeIterObject*>(self);
  Py_VISIT(it->root);
  Py_VISIT(it->is_leaf);
  if (it->frames != nullptr) {
    for (const Frame& f : *it->frames) Py_VISIT(f.children);
  }
  return 0;
}

int IterClear(PyObject* self) {
  auto* it = reinterpret_cast<TreeIterObject*>(self);
  ClearState(it);
  Py_CLEAR(it->is_leaf);
  return 0;
}

void IterDealloc(PyObject* self) {
  auto* it = reinterpret_cast<TreeIterObject*>(self);
  PyObject_GC_UnTrack(self);
  IterClear(self);
  delete it->frames;
  PyObject_GC_Del(self);
}

// The children of `obj` as a list or tuple (new reference), null with an
// exception; *leaf set instead when obj is a leaf.
PyObject* ChildrenOf(PyObject* obj, bool* leaf) {
  const Registration* reg = nullptr;
  bool error = false;
  NodeKind kind = KindOf(obj, &reg, &error);
  if (error) return nullptr;
  switch (kind) {
    case NodeKind::kLeaf:
      *leaf = true;
      return nullptr;
    case NodeKind::kList:
    case NodeKind::kTuple:
    case NodeKind::kNamedTuple:
      return Py_NewRef(obj);
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
    case NodeKind::kDefaultDict: {
      std::vector<PyObject*> keys, values;
      bool ok = SnapshotDict(obj, kind, &keys, &values);
      ReleaseFrom(&keys, 0);
      if (!ok) {
        ReleaseFrom(&values, 0);
        return nullptr;
      }
      return StealIntoList(&values);
    }
    case NodeKind::kDeque: {
      std::vector<PyObject*> values;
      if (!SnapshotDeque(obj, &values)) {
        ReleaseFrom(&values, 0);
        return nullptr;
      }
      return StealIntoList(&values);
    }
    case NodeKind::kCustom: {
      Ref children, context;
      if (!CallCustomFlatten(reg, obj, &children, &context)) return nullptr;
      return children.release();  // a list or tuple (PySequence_Fast)
    }
  }
  CPYTREE_CHECK(false, nullptr);
}

// The next leaf (new reference); null at the end (no exception) or on error.
PyObject* IterNext(PyObject* self) {
  auto* it = reinterpret_cast<TreeIterObject*>(self);
  std::vector<Frame>& frames = *it->frames;
  Ref obj(it->root);  // the root is visited first
  it->root = nullptr;
  for (;;) {
    if (!obj) {
      if (frames.empty()) return nullptr;
      Frame& top = frames.back();
      PyObject* seq = top.children;
#if CPYTREE_FREE_THREADED
      if (PyList_Check(seq)) {
        // Live, as with the GIL, but each read safe against another thread
        // resizing the list (CPython's own list iterator reads this way).
        PyObject* child = PyList_GetItemRef(seq, top.next);
        if (child == nullptr) {
          PyErr_Clear();  // past the end
          frames.pop_back();
          Py_DECREF(seq);
          continue;
        }
        ++top.next;
        obj = Ref(child);
        goto visit;
      }
#endif
      Py_ssize_t n = PyList_Check(seq) ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
      if (top.next >= n) {
        frames.pop_back();
        Py_DECREF(seq);
        continue;
      }
      PyObject* child =
          PyList_Check(seq) ? PyList_GET_ITEM(seq, top.next) : PyTuple_GET_ITEM(seq, top.next);
      ++top.next;
      obj = Ref::Borrow(child);  // held: is_leaf may mutate the list
    }
#if CPYTREE_FREE_THREADED
  visit:
#endif
    if (it->is_leaf != nullptr) {
      Ref r(PyObject_CallOneArg(it->is_leaf, obj.get()));
      int truth = r ? PyObject_IsTrue(r.get()) : -1;
      if (truth < 0) break;
      if (truth > 0) return obj.release();
    }
    bool leaf = false;
    PyObject* children = ChildrenOf(obj.get(), &leaf);
    if (leaf) return obj.release();
    if (children == nullptr) break;
    if (static_cast<int>(frames.size()) >= it->limit) {
      Py_DECREF(children);
      RaiseDepthError("pytree iteration", it->limit);
      break;
    }
    frames.push_back(Frame{children, 0});
    obj = Ref();
  }
  ClearState(it);  // like a generator that raised: exhausted
  return nullptr;
}

#if CPYTREE_FREE_THREADED
PyObject* IterNextGuarded(PyObject* self) {
  auto* it = reinterpret_cast<TreeIterObject*>(self);
  if (__atomic_exchange_n(&it->running, 1, __ATOMIC_ACQUIRE) != 0) {
    PyErr_SetString(PyExc_ValueError, "tree_iter iterator already executing");
    return nullptr;
  }
  struct Done {
    int* running;
    ~Done() { __atomic_store_n(running, 0, __ATOMIC_RELEASE); }
  } done{&it->running};
  return IterNext(self);
}
#endif

}  // namespace

PyObject* PyTreeIter(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const kNames[] = {"tree", "is_leaf"};
  PyObject* parsed[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_iter", args, nargs, kwnames, kNames, 2, 1, parsed)) return nullptr;
  auto frames = std::make_unique<std::vector<Frame>>();  // may throw: before the object
  auto* it = PyObject_GC_New(TreeIterObject, &TreeIterType);
  if (it == nullptr) return nullptr;
  it->root = Py_NewRef(parsed[0]);
  it->is_leaf = parsed[1] == nullptr || parsed[1] == Py_None ? nullptr : Py_NewRef(parsed[1]);
  it->frames = frames.release();
  it->limit = IterativeDepthLimit();  // a heap stack of frames: no C stack per level
  it->running = 0;
  PyObject_GC_Track(reinterpret_cast<PyObject*>(it));
  return reinterpret_cast<PyObject*>(it);
}

bool InitTreeIterType() {
  TreeIterType.tp_name = "cpytree.tree_iterator";
  TreeIterType.tp_basicsize = sizeof(TreeIterObject);
  TreeIterType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  TreeIterType.tp_doc = "A lazy iterator over the leaves of a pytree (tree_iter).";
  TreeIterType.tp_dealloc = IterDealloc;
  TreeIterType.tp_traverse = IterTraverse;
  TreeIterType.tp_clear = IterClear;
  TreeIterType.tp_iter = PyObject_SelfIter;
#if CPYTREE_FREE_THREADED
  TreeIterType.tp_iternext = CPYTREE_GUARDED(IterNextGuarded);
#else
  TreeIterType.tp_iternext = CPYTREE_GUARDED(IterNext);
#endif
  return PyType_Ready(&TreeIterType) >= 0;
}

}  // namespace cpytree
