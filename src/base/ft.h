// Free-threading helpers: the one place that knows whether the GIL exists
// (nanobind's nb_ft.h plays this part). Every traversal reads shared
// containers and shared engine state through these, so that on a
// free-threaded build (Py_GIL_DISABLED, CPython 3.13t and later) another
// thread's mutation gives an answer or an exception, never a crash, and on a
// GIL build they compile to what the code did before (no lock, no atomic
// read-modify-write, the same loads and stores).
//
//   ft::CriticalSection cs(dict);       // Py_BEGIN_CRITICAL_SECTION(dict)
//   PyObject* item = ft::ListItemRef(list, i);  // as CPython's list iterator
//   ft::MutexLock lock(&g_mutex);       // PyMutex; nothing with the GIL
//
// Rules the engine follows on free-threaded builds (STYLE.md):
// - A list the user may hold is read under its critical section (CPython's
//   own per-object lock), as CPython's list copy reads it, for a stretch in
//   which no user code runs (a snapshot of all items, or a run of plain
//   leaves a flatten takes); between such stretches (a child visited that
//   may run user code) item by item as CPython's own list iterator reads it
//   (PyList_GetItemRef: lock-free where CPython's is). A dict is read under
//   its critical section, one state of keys and values. Only into owned
//   references; no borrowed item outlives the section, and no user code
//   runs inside one (a section is suspended while its thread blocks, so it
//   cannot promise atomicity across user code anyway).
// - Engine-wide mutable state either has a lock (ft::Mutex, never held
//   while Python code runs), is immutable once published through an atomic
//   pointer (the registry, key classes, serialization state), or is per
//   thread (CPYTREE_FT_THREAD_LOCAL caches).
// - Lazily computed words (hash caches) are relaxed atomics.
#ifndef CPYTREE_SRC_FT_H_
#define CPYTREE_SRC_FT_H_

#include <cstdint>
#include <vector>

#include "base/common.h"

#if defined(Py_GIL_DISABLED)
#define CPYTREE_FREE_THREADED 1
#else
#define CPYTREE_FREE_THREADED 0
#endif

// Caches that the GIL protects on default builds become per thread without
// it (a torn entry would be read as another type's answer).
#if CPYTREE_FREE_THREADED
#define CPYTREE_FT_THREAD_LOCAL thread_local
#else
#define CPYTREE_FT_THREAD_LOCAL
#endif

namespace cpytree {
namespace ft {

inline constexpr bool kFreeThreaded = CPYTREE_FREE_THREADED != 0;

// Py_BEGIN_CRITICAL_SECTION(o) ... Py_END_CRITICAL_SECTION() as a scope
// object; nothing on GIL builds (the GIL is the lock there).
class CriticalSection {
 public:
#if CPYTREE_FREE_THREADED
  explicit CriticalSection(PyObject* o) { PyCriticalSection_Begin(&cs_, o); }
  ~CriticalSection() { PyCriticalSection_End(&cs_); }
#else
  explicit CriticalSection(PyObject*) {}
#endif
  CriticalSection(const CriticalSection&) = delete;
  CriticalSection& operator=(const CriticalSection&) = delete;

 private:
#if CPYTREE_FREE_THREADED
  PyCriticalSection cs_;
#endif
};

// A lock for engine-wide state: PyMutex (one byte; a thread blocked on it
// detaches from the interpreter, so it cannot deadlock with a stop-the-world
// pause of the garbage collector); nothing on GIL builds. Never held while
// Python code runs (user code may re-enter the engine on the same thread).
class Mutex {
 public:
#if CPYTREE_FREE_THREADED
  void Lock() { PyMutex_Lock(&m_); }
  void Unlock() { PyMutex_Unlock(&m_); }

 private:
  PyMutex m_{};
#else
  void Lock() {}
  void Unlock() {}
#endif
};

class MutexLock {
 public:
  explicit MutexLock(Mutex* m) : m_(m) { m_->Lock(); }
  ~MutexLock() { m_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* m_;
};

// A lazily computed word (a cached hash) that several threads may fill with
// the same value: relaxed atomic accesses without the GIL, plain ones with it.
template <class T>
inline T LoadRelaxed(const T* p) {
#if CPYTREE_FREE_THREADED
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#else
  return *p;
#endif
}
template <class T>
inline void StoreRelaxed(T* p, T v) {
#if CPYTREE_FREE_THREADED
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#else
  *p = v;
#endif
}

// A pointer published by one thread and read by others (a cache slot
// filled once): acquire/release without the GIL, plain with it.
template <class T>
inline T* LoadAcquire(T* const* p) {
#if CPYTREE_FREE_THREADED
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#else
  return *p;
#endif
}
// Stores `v` into the empty slot *p; false (nothing stored) if another
// thread filled it first.
template <class T>
inline bool PublishIfEmpty(T** p, T* v) {
#if CPYTREE_FREE_THREADED
  T* expected = nullptr;
  return __atomic_compare_exchange_n(p, &expected, v, /*weak=*/false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
#else
  if (*p != nullptr) return false;
  *p = v;
  return true;
#endif
}

// Replaces an engine setting that traversals read without a lock (a strong
// reference set by install() or at import): takes a new reference to
// `value` (may be null). With the GIL the old value is released, as
// Py_XSETREF would; without it the old value is kept alive (a traversal in
// another thread may be using it; settings change a handful of times per
// process).
inline void ReplaceSetting(PyObject** slot, PyObject* value) {
  Py_XINCREF(value);
#if CPYTREE_FREE_THREADED
  (void)__atomic_exchange_n(slot, value, __ATOMIC_ACQ_REL);
#else
  Py_XSETREF(*slot, value);
#endif
}

// Item `i` of a list (or list subclass) as a new reference, or null (no
// exception) past its end. Without the GIL it is read as CPython's own list
// iterator reads it (listiter_next): PyList_GetItemRef, lock-free for a list
// this thread owns or one already shared between threads, under the list's
// lock otherwise; a list another thread shrinks meanwhile simply ends
// sooner. Per item, not one state of the whole list: for a traversal that
// streams a list while user code runs between items (is_leaf, custom
// flatten), which gets what `for x in list` would give it. About 30
// instructions an item on 3.13t against about 40 for a critical section
// (callgrind): a run of items read with no code between them takes the
// section instead (AppendListItems, flatten's runs of plain leaves).
inline PyObject* ListItemRef(PyObject* list, Py_ssize_t i) {
  if (i >= PyList_GET_SIZE(list)) return nullptr;
#if CPYTREE_FREE_THREADED
  PyObject* o = PyList_GetItemRef(list, i);
  if (o == nullptr) PyErr_Clear();  // IndexError: another thread shrank it
  return o;
#else
  PyObject* o = PyList_GET_ITEM(list, i);
  Py_INCREF(o);
  return o;
#endif
}

// Appends owned references to the items of a list (or list subclass): one
// state of it, read under its critical section without the GIL, as
// CPython's own list copy (list_slice, list_extend) reads it. One lock per
// list, not an atomic read per item (ListItemRef); no Python code runs.
inline void AppendListItems(PyObject* list, std::vector<PyObject*>* out) {
  CriticalSection cs(list);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); ++i) {
    out->push_back(Py_NewRef(PyList_GET_ITEM(list, i)));
  }
}

// A sequence whose items may be read by index while other threads run: on
// free-threaded builds a list is copied into a tuple (PyList_AsTuple locks
// it), since another thread may resize it and free its item array; a tuple,
// and any sequence on GIL builds, is returned as is. `seq` is a list or
// tuple (PySequence_Fast's result). New reference.
inline PyObject* StableSequence(PyObject* seq) {
#if CPYTREE_FREE_THREADED
  if (PyList_Check(seq)) return PyList_AsTuple(seq);
#endif
  Py_INCREF(seq);
  return seq;
}

// dict[key] as a new reference: 1 found, 0 missing (no exception), -1 error.
// The borrowed reference of PyDict_GetItemWithError is not safe without the
// GIL (another thread may delete the item and free it).
inline int DictGetItemRef(PyObject* dict, PyObject* key, PyObject** out) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyDict_GetItemRef(dict, key, out);
#else
  PyObject* v = PyDict_GetItemWithError(dict, key);
  *out = v;
  if (v == nullptr) return PyErr_Occurred() ? -1 : 0;
  Py_INCREF(v);
  return 1;
#endif
}

// Weak tables (the intern table) hold objects whose count may reach zero in
// another thread at any time: a table lookup may take a reference only
// through TryIncRef, which fails for an object already being freed (its
// deallocator then removes it from the table). EnableTryIncRef must be
// called on the object before it is published in the table (it makes the
// owning thread's last decref synchronise with TryIncRef; CPython's
// _PyObject_SetMaybeWeakref). With the GIL a linked object is alive (the
// deallocator unlinks it before anything else can run): a plain incref.
#if CPYTREE_FREE_THREADED && PY_VERSION_HEX >= 0x030E0000
inline void EnableTryIncRef(PyObject* o) { PyUnstable_EnableTryIncRef(o); }
inline bool TryIncRef(PyObject* o) { return PyUnstable_TryIncRef(o) != 0; }
#elif CPYTREE_FREE_THREADED
// CPython 3.13t has these only as internals (pycore_object.h): the same
// protocol over the public fields of its split reference count. ob_ref_shared
// holds (count << 2) | flags; flags 0 = shared count never used, 1 = may
// have weak references (the owner's last decref then goes through an atomic
// merge), 3 = merged (the owner gave the object up; count 0 means dying).
inline void EnableTryIncRef(PyObject* o) {
  if (_Py_IsImmortal(o)) return;
  Py_ssize_t shared = __atomic_load_n(&o->ob_ref_shared, __ATOMIC_RELAXED);
  while ((shared & 0x3) == 0) {
    if (__atomic_compare_exchange_n(&o->ob_ref_shared, &shared, shared | _Py_REF_MAYBE_WEAKREF,
                                    /*weak=*/false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      return;
    }
  }
}
inline bool TryIncRef(PyObject* o) {
  std::uint32_t local = __atomic_load_n(&o->ob_ref_local, __ATOMIC_RELAXED);
  if (local == _Py_IMMORTAL_REFCNT_LOCAL) return true;
  if (_Py_IsOwnedByCurrentThread(o)) {
    // Only this thread can free an object it owns: it is alive.
    __atomic_store_n(&o->ob_ref_local, local + 1, __ATOMIC_RELAXED);
    return true;
  }
  Py_ssize_t shared = __atomic_load_n(&o->ob_ref_shared, __ATOMIC_RELAXED);
  for (;;) {
    // Count 0 with flags 0 (never marked: see EnableTryIncRef) or 3 (merged:
    // being freed): no reference can be taken.
    if (shared == 0 || shared == _Py_REF_MERGED) return false;
    if (__atomic_compare_exchange_n(&o->ob_ref_shared, &shared,
                                    shared + (Py_ssize_t{1} << _Py_REF_SHARED_SHIFT),
                                    /*weak=*/false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      return true;
    }
  }
}
#else
inline void EnableTryIncRef(PyObject*) {}
inline bool TryIncRef(PyObject* o) {
  Py_INCREF(o);
  return true;
}
#endif

}  // namespace ft
}  // namespace cpytree

#endif  // CPYTREE_SRC_FT_H_
