// The intern table of specs and the identity-preserving hash and equality of
// context items. See intern.h for the design and the locking rules.
#include "ground/intern.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/ft.h"
#include "cpytree/internal/hash_mix.h"

namespace cpytree {
namespace {

// Chain heads by identity hash. Leaked on purpose: specs that outlive the
// module (interpreter shutdown) still unlink themselves safely.
absl::flat_hash_map<std::size_t, TreeSpecObject*>* g_table =
    new absl::flat_hash_map<std::size_t, TreeSpecObject*>();
// Free-threaded builds: guards g_table, the chains and each spec's
// `interned`/`intern_next`/`intern_hash` (intern.h). Held for table work
// only: never while Python code runs.
ft::Mutex g_table_mutex;

// Containers inside contexts are hashed structurally only this deep.
constexpr int kMaxItemDepth = 64;

// Identity-preserving hash of a context item: the type takes part, so 1, 1.0
// and True differ. False if the item is not hashable this way.
bool ItemHash(PyObject* o, std::size_t* out, int depth) {
  if (depth > kMaxItemDepth) return false;
  PyTypeObject* t = Py_TYPE(o);
  if (t == &PyUnicode_Type) {
    // Same value as ViewHash's inlined fast path for str keys.
    Py_hash_t v = PyObject_Hash(o);
    if (v == -1) {
      PyErr_Clear();
      return false;
    }
    *out = static_cast<std::size_t>(v);
    return true;
  }
  std::size_t h = reinterpret_cast<std::size_t>(t);
#if CPYTREE_FREE_THREADED
  // Another thread may mutate a list or dict context item: hash a private
  // snapshot instead (a tuple of the list's items, the dict's item pairs).
  Ref frozen;
  if (t == &PyList_Type) {
    frozen = Ref(PyList_AsTuple(o));
  } else if (t == &PyDict_Type) {
    frozen = Ref(PyDict_Items(o));
  }
  if (t == &PyList_Type || t == &PyDict_Type) {
    if (!frozen) {
      PyErr_Clear();
      return false;
    }
    std::size_t e;
    if (!ItemHash(frozen.get(), &e, depth + 1)) return false;
    *out = internal::HashMix(h, e);
    return true;
  }
#endif
  if (t == &PyTuple_Type || t == &PyList_Type) {
    // A user __hash__ below may mutate a list (or free an item): hold each
    // item, re-read the size, and give up (no interning) if it changed.
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    h = internal::HashMix(h, static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (PySequence_Fast_GET_SIZE(o) != n) return false;
      Ref item = Ref::Borrow(PySequence_Fast_ITEMS(o)[i]);
      std::size_t e;
      if (!ItemHash(item.get(), &e, depth + 1)) return false;
      h = internal::HashMix(h, e);
    }
    if (PySequence_Fast_GET_SIZE(o) != n) return false;
  } else if (t == &PyDict_Type) {
    Py_ssize_t pos = 0, n = PyDict_GET_SIZE(o);
    PyObject *k, *v;
    h = internal::HashMix(h, static_cast<std::size_t>(n));
    while (PyDict_Next(o, &pos, &k, &v)) {
      // Same as above: user __hash__ may clear the dict and free k and v.
      Ref hold_k = Ref::Borrow(k), hold_v = Ref::Borrow(v);
      std::size_t hk, hv;
      if (!ItemHash(k, &hk, depth + 1) || !ItemHash(v, &hv, depth + 1)) return false;
      if (PyDict_GET_SIZE(o) != n) return false;
      h = internal::HashMix(internal::HashMix(h, hk), hv);
    }
  } else if (PyType_Check(o)) {
    h = internal::HashMix(h, reinterpret_cast<std::size_t>(o));
  } else {
    Py_hash_t v = PyObject_Hash(o);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    h = internal::HashMix(h, static_cast<std::size_t>(v));
  }
  *out = h;
  return true;
}

// Structural hash of a view: the post-order (kind, arity) sequence fixes the
// shape (counts and offsets follow from it), then the items. False if some
// item is not identity-hashable.
bool ViewHash(SpecView v, std::size_t* out) {
  std::size_t h = static_cast<std::size_t>(v.num_nodes);
  std::size_t num_items = 0;
  for (std::int64_t i = 0; i < v.num_nodes; ++i) {
    const Node& n = v.nodes[i];
    h = internal::HashNodeShape(h, n);
    num_items += NumContextItems(n.kind, n.arity);
  }
  PyObject* const* items = v.items + v.root().ctx;
  for (std::size_t i = 0; i < num_items; ++i) {
    PyObject* o = items[i];
    if (PyUnicode_CheckExact(o)) {
      // The common dict key: a str whose hash CPython already cached (another
      // thread may be caching it right now: a relaxed read without the GIL).
      Py_hash_t cached = ft::LoadRelaxed(&reinterpret_cast<PyASCIIObject*>(o)->hash);
      if (cached != -1) {
        h = internal::HashMix(h, static_cast<std::size_t>(cached));
        continue;
      }
    }
    std::size_t e;
    if (!ItemHash(o, &e, 0)) return false;
    h = internal::HashMix(h, e);
  }
  *out = h;
  return true;
}

// Same structure under identity equality (node bytes, then items).
bool SameStructure(SpecView a, const TreeSpecObject* s) {
  SpecView b = ViewOf(s);
  if (a.num_nodes != b.num_nodes) return false;
  // Node ctx offsets are relative to the view's own item base: compare them
  // after rebasing by each root's ctx.
  std::uint32_t base_a = a.root().ctx, base_b = b.root().ctx;
  if (base_a == base_b) {
    if (std::memcmp(a.nodes, b.nodes, sizeof(Node) * a.num_nodes) != 0) return false;
  } else {
    for (std::int64_t i = 0; i < a.num_nodes; ++i) {
      Node x = a.nodes[i], y = b.nodes[i];
      x.ctx -= base_a;
      y.ctx -= base_b;
      if (std::memcmp(&x, &y, sizeof(Node)) != 0) return false;
    }
  }
  std::size_t n = s->items->size();
  for (std::size_t i = 0; i < n; ++i) {
    if (!IdentityEqual(a.items[base_a + i], b.items[base_b + i])) return false;
  }
  return true;
}

// Equal and of the same sign (so 0.0 and -0.0 differ); NaN is never equal.
inline bool SameFloat(double x, double y) { return x == y && std::signbit(x) == std::signbit(y); }

}  // namespace

int IdentityEqual(PyObject* a, PyObject* b, int depth) {
  if (a == b) return 1;
  PyTypeObject* t = Py_TYPE(a);
  if (t != Py_TYPE(b) || depth > kMaxItemDepth) return 0;
  if (t == &PyUnicode_Type) return PyUnicode_Compare(a, b) == 0;
  // 0.0 == -0.0, but unflatten must give back the key it saw: floats (and
  // complex parts) are the same item only with the same sign too.
  if (t == &PyFloat_Type) return SameFloat(PyFloat_AS_DOUBLE(a), PyFloat_AS_DOUBLE(b));
  if (t == &PyComplex_Type) {
    Py_complex x = PyComplex_AsCComplex(a), y = PyComplex_AsCComplex(b);
    return SameFloat(x.real, y.real) && SameFloat(x.imag, y.imag);
  }
#if CPYTREE_FREE_THREADED
  if (t == &PyList_Type) {  // another thread may resize them: compare snapshots
    Ref fa(PyList_AsTuple(a)), fb(PyList_AsTuple(b));
    if (!fa || !fb) {
      PyErr_Clear();
      return 0;
    }
    return IdentityEqual(fa.get(), fb.get(), depth + 1);
  }
#endif
  if (t == &PyTuple_Type || t == &PyList_Type) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
    if (n != PySequence_Fast_GET_SIZE(b)) return 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
      // Lists may change under user __eq__: re-check the size each step.
      if (i >= PySequence_Fast_GET_SIZE(a) || i >= PySequence_Fast_GET_SIZE(b)) return 0;
      Ref x = Ref::Borrow(PySequence_Fast_ITEMS(a)[i]);
      Ref y = Ref::Borrow(PySequence_Fast_ITEMS(b)[i]);
      if (!IdentityEqual(x.get(), y.get(), depth + 1)) return 0;
    }
    return 1;
  }
  if (t == &PyDict_Type) {
    if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) return 0;
    Ref ia(PyDict_Items(a)), ib(PyDict_Items(b));
    if (!ia || !ib) {
      PyErr_Clear();
      return 0;
    }
    return IdentityEqual(ia.get(), ib.get(), depth + 1);
  }
  if (PyType_Check(a)) return 0;  // types are equal only when identical
  int r = PyObject_RichCompareBool(a, b, Py_EQ);
  if (r < 0) {
    PyErr_Clear();
    return 0;
  }
  return r;
}

namespace {

// The longest chain a lookup walks. Specs share a chain when their context
// items hash alike (a user __hash__ that returns a constant, say), and each
// step may call user __eq__: unbounded, every flatten of such a structure
// cost one __eq__ per live spec of the chain (quadratic; see test_limits.py).
// Past the bound a structure is not interned: its spec stays private (==
// still holds, `is` does not).
constexpr int kMaxChainWalk = 16;

#if CPYTREE_FREE_THREADED
// The interned spec equal to `v` (new reference), or null (no exception):
// then *linkable says whether a new spec may join the chain. Without the
// GIL: the chain's candidates are taken (TryIncRef: a spec whose count
// reached zero in another thread is skipped, its deallocator is about to
// unlink it) under the table's mutex, and compared after it is released
// (the comparison may run user __eq__, which may intern again).
TreeSpecObject* FindInterned(SpecView v, std::size_t hash, bool* linkable) {
  TreeSpecObject* cands[kMaxChainWalk];
  int n = 0;
  {
    ft::MutexLock lock(&g_table_mutex);
    auto it = g_table->find(hash);
    TreeSpecObject* s = it == g_table->end() ? nullptr : it->second;
    for (; s != nullptr; s = s->intern_next) {
      if (n == kMaxChainWalk) {
        *linkable = false;
        break;
      }
      if (ft::TryIncRef(reinterpret_cast<PyObject*>(s))) cands[n++] = s;
    }
  }
  TreeSpecObject* found = nullptr;
  for (int i = 0; i < n; ++i) {
    if (found == nullptr && SameStructure(v, cands[i])) {
      found = cands[i];
    } else {
      Py_DECREF(cands[i]);
    }
  }
  return found;
}
#else
// The interned spec equal to `v` (new reference), or null (no exception):
// then *linkable says whether a new spec may join the chain.
TreeSpecObject* FindInterned(SpecView v, std::size_t hash, bool* linkable) {
  auto it = g_table->find(hash);
  TreeSpecObject* cand = it == g_table->end() ? nullptr : it->second;
  if (cand != nullptr) Py_INCREF(cand);
  for (int steps = 0; cand != nullptr; ++steps) {
    if (steps == kMaxChainWalk) {
      Py_DECREF(cand);
      *linkable = false;
      return nullptr;
    }
    // `cand` is held strongly: user __eq__ inside SameStructure may drop the
    // table's last reference to it or relink the chain.
    if (SameStructure(v, cand)) return cand;
    TreeSpecObject* next = cand->interned ? cand->intern_next : nullptr;
    Py_XINCREF(next);
    Py_DECREF(cand);
    cand = next;
  }
  return nullptr;
}

#endif

void Link(TreeSpecObject* s, std::size_t hash) {
  ft::EnableTryIncRef(reinterpret_cast<PyObject*>(s));  // before another thread can find it
  ft::MutexLock lock(&g_table_mutex);
  s->intern_hash = hash;
  s->interned = true;
  TreeSpecObject*& head = (*g_table)[hash];
  s->intern_next = head;
  head = s;
}

}  // namespace

PyObject* InternView(SpecView v) {
  std::size_t hash;
  bool hashable = ViewHash(v, &hash);
  if (hashable) {
    TreeSpecObject* found = FindInterned(v, hash, &hashable);
    if (found != nullptr) return reinterpret_cast<PyObject*>(found);
  }
  // New, or not identity-hashable (e.g. an unhashable custom context): then
  // the spec stays private to its caller.
  TreeSpecObject* s = NewSpecFromRange(v, 0, v.num_nodes - 1);
  if (s != nullptr && hashable) Link(s, hash);
  return reinterpret_cast<PyObject*>(s);
}

PyObject* InternArena(TraversalArena* b) {
  SpecView v = b->View();
  std::size_t hash;
  bool hashable = ViewHash(v, &hash);
  if (hashable) {
    TreeSpecObject* found = FindInterned(v, hash, &hashable);
    if (found != nullptr) return reinterpret_cast<PyObject*>(found);
  }
  // A new structure: the spec takes the arena's arrays (and item
  // references) instead of copying them; the arena gets fresh storage of
  // the same capacity so the next flatten does not regrow it.
  TreeSpecObject* s = NewSpecTakingArena(b);
  if (s != nullptr && hashable) Link(s, hash);
  return reinterpret_cast<PyObject*>(s);
}

namespace {
PyObject* g_leaf_spec = nullptr;  // kept alive forever
}  // namespace

bool InternLeafSpec() {
  Node leaf = internal::MakeNode(NodeKind::kLeaf, 0, 0, 1, 1);
  g_leaf_spec = InternView(SpecView{&leaf, 1, nullptr});
  return g_leaf_spec != nullptr;
}

PyObject* LeafSpec() { return g_leaf_spec; }

void ForgetSpec(TreeSpecObject* spec) {
  ft::MutexLock lock(&g_table_mutex);
  if (!spec->interned) return;
  spec->interned = false;
  auto it = g_table->find(spec->intern_hash);
  if (it == g_table->end()) return;
  TreeSpecObject** link = &it->second;
  while (*link != nullptr && *link != spec) link = &(*link)->intern_next;
  if (*link == spec) *link = spec->intern_next;
  if (it->second == nullptr) g_table->erase(it);
  spec->intern_next = nullptr;
}

Py_ssize_t InternTableSize() {
  ft::MutexLock lock(&g_table_mutex);
  Py_ssize_t n = 0;
  for (const auto& entry : *g_table) {
    for (TreeSpecObject* s = entry.second; s != nullptr; s = s->intern_next) ++n;
  }
  return n;
}

}  // namespace cpytree
