// The node-type registry of the engine: which Python types are pytree nodes
// and how to flatten them.
//
// Exact list, tuple, dict and None are dispatched by pointer before any lookup
// (see Classify). The registry maps a type pointer to a Registration; it holds
// the builtin kinds that are not dispatched by pointer (OrderedDict,
// defaultdict, deque) and every type registered from Python.
//
// Concurrency: who touches what, under which lock.
// - The map (registry.cc `g_map`): read lock-free by every traversal: it is
//   immutable once published and reached through one atomic pointer. A
//   writer copies it, changes the copy and publishes it (exchange).
//   Default builds: lookups and writers all hold the GIL, and a lookup runs
//   no Python code, so no lookup is under way while a writer runs: the old
//   map is freed at once.
// - Registrations: a map owns those it holds (a copied map shares them). One
//   that a writer removes or replaces is freed (its references released)
//   after the writer publishes and unlocks. A traversal that keeps a
//   registration across user code (which may deregister the type, on this
//   thread or, by releasing the GIL, on another) pins it first
//   (PinnedRegistration below): a copy holding the type and functions
//   strongly. So registering and deregistering in a loop keeps memory
//   bounded (before: ~870 bytes and the type kept alive per round, forever).
// - Free-threaded builds (CPYTREE_FREE_THREADED): lookups run during writes, so
//   the old map and the registrations a writer drops wait for a grace
//   period (grace.h: epoch-based reclamation). A lookup announces the
//   registry generation in its thread's reader slot before it loads the map
//   (its "read"); a writer, after publishing, bumps the generation, retires
//   what it replaced with the new generation, and frees every retired object
//   older than the oldest open read (maps under its lock, registrations'
//   references after it unlocked). The read ends (EndRegistryRead) as soon
//   as the lookup's result is no longer read: inside the lookup when it
//   found no registration or a builtin one (OrderedDict, defaultdict, deque:
//   never removed, never freed); for a custom one, once the caller holds
//   what it uses: PinnedRegistration, CallCustomFlatten and NewCustomNode
//   (children.h) end it; a caller that wanted only the kind ends it itself.
//   Between a lookup and its end no Python code runs and no other lookup is
//   made on that thread (so an EndRegistryRead in code that user code
//   reached never ends another frame's read; ending twice is harmless).
//   Retired objects that a read still held are freed by a later writer.
// - Writers (RegisterNode, UnregisterNode): serialised by `writer_mutex`
//   (ft::Mutex: a PyMutex without the GIL; the GIL serialises them on
//   default builds). Nothing under the mutex calls into Python (only
//   Py_INCREF). The retired list (free-threaded builds) is guarded by it.
// - g_scalar_registered: set by a writer, read relaxed; never cleared.
// - The leaf-type cache (below): default builds, one relaxed atomic cleared
//   by every Publish; free-threaded builds, one entry per thread stamped
//   with the registry generation it was looked up in (g_registry_generation,
//   bumped by every Publish after the new map is visible). It compares type
//   pointers and never dereferences them: a type freed after its
//   registration was reclaimed cannot be mistaken (see LeafTypeCache).
// - The namedtuple cache (registry.cc): plain memory, touched only with the
//   GIL held (per thread on free-threaded builds); its lookups run user code
//   (attribute lookups), so an entry is re-validated before it is written.
//   It holds no registration and runs before the registry read begins.
#ifndef CPYTREE_SRC_REGISTRY_H_
#define CPYTREE_SRC_REGISTRY_H_

#include <atomic>

#include "base/common.h"
#include "base/ft.h"
#include "base/grace.h"
#include "cpytree/kind.h"

namespace cpytree {

// How one node type flattens. Immutable after publication.
struct Registration {
  NodeKind kind;                   // builtin kind, or kCustom
  PyObject* type;                  // strong: the registered type
  PyObject* flatten_fn;            // strong; custom only: x -> (children, context)
  PyObject* unflatten_fn;          // strong; custom only: (children, context) -> x
  PyObject* flatten_with_keys_fn;  // strong or null; custom only
};

// A registration that stays valid while user code runs: a copy holding the
// type and functions strongly (see the concurrency block above). Take one
// right after the lookup, before any Python code can run; it ends the
// lookup's registry read.
class PinnedRegistration {
 public:
  explicit PinnedRegistration(const Registration* reg) : reg_(*reg) {
    Py_XINCREF(reg_.type);
    Py_XINCREF(reg_.flatten_fn);
    Py_XINCREF(reg_.unflatten_fn);
    Py_XINCREF(reg_.flatten_with_keys_fn);
    grace::EndRead();  // the lookup's read (free-threaded builds): reg is not read again
  }
  PinnedRegistration(const PinnedRegistration&) = delete;
  PinnedRegistration& operator=(const PinnedRegistration&) = delete;
  ~PinnedRegistration() {
    if (!MayReleaseInDestructor()) return;  // a daemon thread torn down at exit (common.h)
    Py_XDECREF(reg_.type);
    Py_XDECREF(reg_.flatten_fn);
    Py_XDECREF(reg_.unflatten_fn);
    Py_XDECREF(reg_.flatten_with_keys_fn);
  }
  const Registration* get() const { return &reg_; }

 private:
  Registration reg_;
};

// Python objects the engine needs, resolved once at module init.
struct Builtins {
  PyObject* namedtuple_fn;        // collections.namedtuple: spec.type of namedtuples
  PyObject* ordered_dict;         // collections.OrderedDict
  PyObject* defaultdict;          // collections.defaultdict
  PyObject* deque;                // collections.deque
  PyObject* str_fields;           // interned "_fields"
  PyObject* str_make;             // interned "_make"
  PyObject* str_asdict;           // interned "_asdict"
  PyObject* str_maxlen;           // interned "maxlen"
  PyObject* str_default_factory;  // interned "default_factory"
  PyObject* str_name;             // interned "__name__"
};
extern Builtins g_builtins;

// Resolves g_builtins and seeds the registry with the builtin kinds.
bool InitRegistry();

// Set once any of int, float, str, bool or complex is registered as a node
// (torch allows it); until then those types are leaves without a lookup.
extern std::atomic<bool> g_scalar_registered;

// True for exact int/float/str/bool/complex while none of them is registered:
// the common non-container leaves, decided without a hash lookup.
inline bool IsPlainScalarLeaf(PyTypeObject* t) {
  return (t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type || t == &PyBool_Type ||
          t == &PyComplex_Type) &&
         !g_scalar_registered.load(std::memory_order_relaxed);
}

// The registration of exactly `type`, or null. Lock-free. Free-threaded
// builds: a custom registration it returns stays allocated until this
// thread's EndRegistryRead() (the concurrency block above); for a null or
// builtin result the read has ended already.
#if CPYTREE_FREE_THREADED
// `generation`: g_registry_generation, loaded (acquire) before the call.
const Registration* LookupRegistration(PyTypeObject* type, std::uint64_t generation);
const Registration* LookupRegistration(PyTypeObject* type);
#else
const Registration* LookupRegistration(PyTypeObject* type);
#endif

// Ends this thread's registry read (free-threaded builds; nothing with the
// GIL): the custom registration its last lookup returned is not read again.
inline void EndRegistryRead() { grace::EndRead(); }

// A one-entry cache of the last non-tuple type found to be a leaf (trees
// repeat one leaf type: tensors), so most leaves skip the hash lookup. Every
// registration clears it. A type freed and its address reused by another
// non-tuple type is still correctly a leaf unless registered, which clears
// the cache. Relaxed atomics. With the GIL, Classify's lookup and its
// CacheLeafType run with no Python code between them, so no registration
// can slip in. Without the GIL one can: a lookup that missed type T, then a
// registration of T that clears the cache, then the store of T would keep T
// a leaf after its registration returned: so a free-threaded build keeps
// one entry per thread with the registry generation of its lookup, and
// trusts only a current one.
#if CPYTREE_FREE_THREADED
// Bumped by every Publish, after the new map is stored. Also the epoch of
// the registry's grace periods (grace.h): starts at 1, since a reader slot
// holding 0 reads nothing.
extern std::atomic<std::uint64_t> g_registry_generation;
struct LeafTypeCache {
  PyTypeObject* type = nullptr;
  std::uint64_t generation = 0;  // of the registry the miss was looked up in
};
extern thread_local LeafTypeCache t_leaf_type_cache;
// The cached leaf type while no registration happened since (else null).
inline PyTypeObject* CachedLeafType() {
  const LeafTypeCache& c = t_leaf_type_cache;
  return c.generation == g_registry_generation.load(std::memory_order_acquire) ? c.type : nullptr;
}
inline bool IsCachedLeafType(PyTypeObject* type) { return type == CachedLeafType(); }
// `generation`: g_registry_generation read before the lookup that missed.
inline void CacheLeafType(PyTypeObject* type, std::uint64_t generation) {
  t_leaf_type_cache = LeafTypeCache{type, generation};
}
#else
extern std::atomic<PyTypeObject*> g_leaf_type_cache;
inline PyTypeObject* CachedLeafType() { return g_leaf_type_cache.load(std::memory_order_relaxed); }
inline bool IsCachedLeafType(PyTypeObject* type) {
  return type == g_leaf_type_cache.load(std::memory_order_relaxed);
}
inline void CacheLeafType(PyTypeObject* type) {
  g_leaf_type_cache.store(type, std::memory_order_relaxed);
}
#endif

// Whether `type` is a namedtuple class as torch defines it (a tuple subclass
// with `_fields` of str, callable `_make` and `_asdict`). -1 with an exception.
int IsNamedTupleClass(PyTypeObject* type);

// Whether the namedtuple class `type` uses collections.namedtuple's own
// __new__ (cached per type like IsNamedTupleClass): NewNamedTuple
// (children.h) then builds its instances directly.
bool PlainNamedTupleNew(PyTypeObject* type);

// The kind of the builtin types the registry holds (OrderedDict, defaultdict,
// deque; exact types), kLeaf for any other type: their registrations are
// fixed at import (RegisterNode leaves them as they are, UnregisterNode
// refuses them), so a pointer compare gives the map's answer without the
// hash lookup and, without the GIL, without a registry read.
inline NodeKind BuiltinMapKind(PyTypeObject* type) {
  PyObject* t = reinterpret_cast<PyObject*>(type);
  if (t == g_builtins.ordered_dict) return NodeKind::kOrderedDict;
  if (t == g_builtins.defaultdict) return NodeKind::kDefaultDict;
  if (t == g_builtins.deque) return NodeKind::kDeque;
  return NodeKind::kLeaf;
}

// The node kind of `obj`, for objects that are not exact list/tuple/dict/None;
// kLeaf if it is not a node. Sets *reg for kCustom (free-threaded builds:
// readable until EndRegistryRead, see LookupRegistration); sets *error
// (with an exception) if the namedtuple check raised.
// Namedtuples win over explicit registrations, as in torch.
inline NodeKind Classify(PyObject* obj, const Registration** reg, bool* error) {
  PyTypeObject* type = Py_TYPE(obj);
  if (PyTuple_Check(obj)) {
    int nt = IsNamedTupleClass(type);
    if (nt != 0) {
      if (nt < 0) *error = true;
      return NodeKind::kNamedTuple;
    }
  } else if (IsCachedLeafType(type)) {
    return NodeKind::kLeaf;
  } else if (NodeKind k = BuiltinMapKind(type); k != NodeKind::kLeaf) {
    return k;
  }
#if CPYTREE_FREE_THREADED
  std::uint64_t generation = g_registry_generation.load(std::memory_order_acquire);
#endif
#if CPYTREE_FREE_THREADED
  const Registration* r = LookupRegistration(type, generation);
#else
  const Registration* r = LookupRegistration(type);
#endif
  if (r == nullptr) {
#if CPYTREE_FREE_THREADED
    if (!PyTuple_Check(obj)) CacheLeafType(type, generation);
#else
    if (!PyTuple_Check(obj)) CacheLeafType(type);
#endif
    return NodeKind::kLeaf;
  }
  *reg = r;
  return r->kind;
}

// The kind of any object (including exact builtins). Sets *reg for kCustom
// (as Classify: free-threaded builds, readable until EndRegistryRead).
inline NodeKind KindOf(PyObject* obj, const Registration** reg, bool* error) {
  PyTypeObject* type = Py_TYPE(obj);
  if (type == &PyTuple_Type) return NodeKind::kTuple;
  if (type == &PyList_Type) return NodeKind::kList;
  if (type == &PyDict_Type) return NodeKind::kDict;
  if (obj == Py_None || IsPlainScalarLeaf(type)) return NodeKind::kLeaf;
  return Classify(obj, reg, error);
}

// Registers `type` as a custom node (replacing an earlier registration).
bool RegisterNode(PyObject* type, PyObject* flatten_fn, PyObject* unflatten_fn,
                  PyObject* flatten_with_keys_fn);
// Removes a custom registration; false with KeyError if there is none.
bool UnregisterNode(PyObject* type);

// Python-facing: _register_node(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
PyObject* PyRegisterNode(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
// Python-facing: _unregister_node(cls)
PyObject* PyUnregisterNode(PyObject* self, PyObject* arg);

}  // namespace cpytree

#endif  // CPYTREE_SRC_REGISTRY_H_
