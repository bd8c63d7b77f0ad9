// The type registry: a copy-on-write flat_hash_map published through an atomic
// pointer. See registry.h for the concurrency design.
#include "ground/registry.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/odict_layout.h"

namespace cpytree {

Builtins g_builtins;
std::atomic<bool> g_scalar_registered{false};

namespace {

using RegistryMap = absl::flat_hash_map<PyTypeObject*, const Registration*>;

// The published map. Readers load it with acquire (seq_cst without the GIL:
// grace.h); writers replace it.
std::atomic<const RegistryMap*> g_map{nullptr};
// Serialises writers (the GIL already does on default builds).
ft::Mutex writer_mutex;
#if CPYTREE_FREE_THREADED
// Maps and registrations a writer replaced or removed, with the generation
// whose Publish did it: freed once no reader announced an older one
// (grace.h). Guarded by writer_mutex.
struct Retired {
  std::uint64_t generation;
  const RegistryMap* map;  // or null
  Registration* reg;       // or null
};
std::vector<Retired>* g_retired = nullptr;

// What a writer found freeable under the lock, freed after it unlocked.
struct Reclaimed {
  std::vector<const RegistryMap*> maps;
  std::vector<Registration*> regs;
};
#endif

PyObject* ImportAttr(const char* module, const char* name) {
  Ref mod(PyImport_ImportModule(module));
  if (!mod) return nullptr;
  return PyObject_GetAttrString(mod.get(), name);
}

// Frees a registration no map holds any more (null: nothing). Called by a
// writer after it unlocked: releasing the references may run Python code (a
// finalizer) that registers again.
void FreeRegistration(Registration* reg) {
  if (reg == nullptr) return;
  Py_XDECREF(reg->type);
  Py_XDECREF(reg->flatten_fn);
  Py_XDECREF(reg->unflatten_fn);
  Py_XDECREF(reg->flatten_with_keys_fn);
  delete reg;
}

#if CPYTREE_FREE_THREADED
// Publishes `next`, retires the previous map and `dropped` (a registration
// `next` no longer holds, or null), and moves what no reader can still see
// into *out. Under writer_mutex.
void Publish(std::unique_ptr<RegistryMap> next, Registration* dropped, Reclaimed* out) {
  const RegistryMap* old = g_map.exchange(next.release(), std::memory_order_seq_cst);
  std::uint64_t generation = g_registry_generation.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (old != nullptr) g_retired->push_back(Retired{generation, old, nullptr});
  if (dropped != nullptr) g_retired->push_back(Retired{generation, nullptr, dropped});
  std::uint64_t oldest = grace::OldestReader();
  std::size_t kept = 0;
  for (const Retired& r : *g_retired) {
    if (r.generation <= oldest) {
      if (r.map != nullptr) out->maps.push_back(r.map);
      if (r.reg != nullptr) out->regs.push_back(r.reg);
    } else {
      (*g_retired)[kept++] = r;
    }
  }
  g_retired->resize(kept);
}

// Frees what Publish reclaimed. Called by a writer after it unlocked:
// releasing the references may run Python code (a finalizer) that
// registers again.
void FreeReclaimed(Reclaimed* out) {
  for (const RegistryMap* map : out->maps) delete map;
  for (Registration* reg : out->regs) FreeRegistration(reg);
}
#else
// Publishes `next` and frees the previous map (no lookup is under way: the
// writer holds the GIL, see registry.h).
void Publish(std::unique_ptr<RegistryMap> next) {
  const RegistryMap* old = g_map.exchange(next.release(), std::memory_order_acq_rel);
  g_leaf_type_cache.store(nullptr, std::memory_order_relaxed);
  delete old;
}
#endif

// A registration owned by the maps that will hold it (freed by FreeRegistration).
const Registration* NewRegistration(NodeKind kind, PyObject* type, PyObject* flatten_fn,
                                    PyObject* unflatten_fn, PyObject* with_keys_fn) {
  auto reg = std::make_unique<Registration>();
  reg->kind = kind;
  Py_XINCREF(type);
  Py_XINCREF(flatten_fn);
  Py_XINCREF(unflatten_fn);
  Py_XINCREF(with_keys_fn);
  reg->type = type;
  reg->flatten_fn = flatten_fn;
  reg->unflatten_fn = unflatten_fn;
  reg->flatten_with_keys_fn = with_keys_fn;
  return reg.release();
}

bool IsCallableAttr(PyObject* type, PyObject* name) {
  PyObject* attr = PyObject_GetAttr(type, name);
  if (attr == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool ok = PyCallable_Check(attr);
  Py_DECREF(attr);
  return ok;
}

}  // namespace

bool InitRegistry() {
  g_builtins.namedtuple_fn = ImportAttr("collections", "namedtuple");
  g_builtins.ordered_dict = ImportAttr("collections", "OrderedDict");
  g_builtins.defaultdict = ImportAttr("collections", "defaultdict");
  g_builtins.deque = ImportAttr("collections", "deque");
  if (!g_builtins.namedtuple_fn || !g_builtins.ordered_dict || !g_builtins.defaultdict ||
      !g_builtins.deque) {
    return false;
  }
  g_builtins.str_fields = PyUnicode_InternFromString("_fields");
  g_builtins.str_make = PyUnicode_InternFromString("_make");
  g_builtins.str_asdict = PyUnicode_InternFromString("_asdict");
  g_builtins.str_maxlen = PyUnicode_InternFromString("maxlen");
  g_builtins.str_default_factory = PyUnicode_InternFromString("default_factory");
  g_builtins.str_name = PyUnicode_InternFromString("__name__");
  if (!g_builtins.str_fields || !g_builtins.str_make || !g_builtins.str_asdict ||
      !g_builtins.str_maxlen || !g_builtins.str_default_factory || !g_builtins.str_name) {
    return false;
  }
#if CPYTREE_FREE_THREADED
  g_retired = new std::vector<Retired>();
#endif
  auto map = std::make_unique<RegistryMap>();
  const struct {
    PyObject* type;
    NodeKind kind;
  } builtin[] = {{g_builtins.ordered_dict, NodeKind::kOrderedDict},
                 {g_builtins.defaultdict, NodeKind::kDefaultDict},
                 {g_builtins.deque, NodeKind::kDeque}};
  for (const auto& b : builtin) {
    (*map)[reinterpret_cast<PyTypeObject*>(b.type)] =
        NewRegistration(b.kind, b.type, nullptr, nullptr, nullptr);
  }
#if CPYTREE_FREE_THREADED
  Reclaimed none;  // there was no map to retire
  Publish(std::move(map), nullptr, &none);
#else
  Publish(std::move(map));
#endif
  return internal_odict::VerifyLayout(g_builtins.ordered_dict);
}

#if CPYTREE_FREE_THREADED
std::atomic<std::uint64_t> g_registry_generation{1};
thread_local LeafTypeCache t_leaf_type_cache;

const Registration* LookupRegistration(PyTypeObject* type, std::uint64_t generation) {
  grace::ReaderSlot* slot = grace::ThisThreadSlot();
  grace::BeginRead(slot, generation);
  const RegistryMap* map = g_map.load(std::memory_order_seq_cst);
  auto it = map->find(type);
  const Registration* r = it == map->end() ? nullptr : it->second;
  // Builtin registrations are never removed: only a custom one is read on.
  if (r == nullptr || r->kind != NodeKind::kCustom) grace::EndRead(slot);
  return r;
}

const Registration* LookupRegistration(PyTypeObject* type) {
  return LookupRegistration(type, g_registry_generation.load(std::memory_order_acquire));
}
#else
std::atomic<PyTypeObject*> g_leaf_type_cache{nullptr};

const Registration* LookupRegistration(PyTypeObject* type) {
  const RegistryMap* map = g_map.load(std::memory_order_acquire);
  auto it = map->find(type);
  return it == map->end() ? nullptr : it->second;
}
#endif

namespace {

// Answers of IsNamedTupleClass, direct-mapped by type pointer and validated
// by the type's version tag: CPython gives every type a fresh tag (a global
// counter) and invalidates it when the type or a base is modified, so a hit
// with a matching valid tag is the answer for this very type, unchanged.
// Touched only with the GIL held; per thread on free-threaded builds.
struct NamedTupleCacheEntry {
  PyTypeObject* type = nullptr;
  unsigned int version_tag = 0;
  bool is_namedtuple = false;
  signed char plain_new = -1;  // PlainNamedTupleNew's answer; -1 not computed yet
};
CPYTREE_FT_THREAD_LOCAL NamedTupleCacheEntry g_namedtuple_cache[64];

NamedTupleCacheEntry& CacheSlot(PyTypeObject* type) {
  return g_namedtuple_cache[(reinterpret_cast<std::uintptr_t>(type) >> 4) & 63];
}

// The type's version tag, 0 when it has no valid one. Without the GIL other
// threads may assign or invalidate it meanwhile (relaxed reads).
unsigned int VersionTag(PyTypeObject* type) {
  if (!(ft::LoadRelaxed(&type->tp_flags) & Py_TPFLAGS_VALID_VERSION_TAG)) return 0;
  return ft::LoadRelaxed(&type->tp_version_tag);
}

bool HasValidVersionTag(PyTypeObject* type) { return VersionTag(type) != 0; }

int ComputeIsNamedTupleClass(PyTypeObject* type);

}  // namespace

int IsNamedTupleClass(PyTypeObject* type) {
  NamedTupleCacheEntry& slot = CacheSlot(type);
  if (slot.type == type && HasValidVersionTag(type) && slot.version_tag == VersionTag(type)) {
    return slot.is_namedtuple;
  }
  int r = ComputeIsNamedTupleClass(type);
  // The attribute lookups above assigned the type a version tag if it can
  // have one; without a valid tag the answer is not cached.
  if (r >= 0 && HasValidVersionTag(type)) {
    slot.type = type;
    slot.version_tag = VersionTag(type);
    slot.is_namedtuple = r == 1;
    slot.plain_new = -1;
  }
  return r;
}

namespace {

// Whether `cls(*values)` would only run the __new__ collections.namedtuple
// generated (`_tuple_new(_cls, (x, y, ...))`): that __new__ unchanged, no
// __init__ and a plain metaclass. Then the tuple can be built directly.
bool ComputePlainNamedTupleNew(PyTypeObject* type) {
  if (Py_TYPE(type)->tp_call != PyType_Type.tp_call) return false;  // metaclass __call__
  if (type->tp_init != PyTuple_Type.tp_init && type->tp_init != PyBaseObject_Type.tp_init) {
    return false;  // a subclass __init__ would run
  }
  Ref new_attr(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__new__"));
  if (!new_attr || !PyFunction_Check(new_attr.get())) {
    PyErr_Clear();
    return false;
  }
  PyObject* globals = PyFunction_GetGlobals(new_attr.get());
  // Owned: another thread may change the globals meanwhile.
  Ref tuple_new_name(PyUnicode_InternFromString("_tuple_new"));
  PyObject *tuple_new_ref = nullptr, *module_name_ref = nullptr;
  bool failed = !tuple_new_name ||
                ft::DictGetItemRef(globals, tuple_new_name.get(), &tuple_new_ref) < 0 ||
                ft::DictGetItemRef(globals, g_builtins.str_name, &module_name_ref) < 0;
  Ref tuple_new_held(tuple_new_ref), module_name_held(module_name_ref);
  if (failed) {
    PyErr_Clear();
    return false;
  }
  PyObject* tuple_new = tuple_new_ref;
  PyObject* module_name = module_name_ref;
  if (tuple_new == nullptr || module_name == nullptr || !PyUnicode_Check(module_name)) {
    return false;
  }
  Ref expected(PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyTuple_Type), "__new__"));
  if (!expected) {
    PyErr_Clear();
    return false;
  }
  Ref prefix(PyUnicode_FromString("namedtuple_"));
  return prefix && tuple_new == expected.get() &&
         PyUnicode_Tailmatch(module_name, prefix.get(), 0, 11, -1) == 1;
}

}  // namespace

bool PlainNamedTupleNew(PyTypeObject* type) {
  NamedTupleCacheEntry& slot = CacheSlot(type);
  bool cached =
      slot.type == type && HasValidVersionTag(type) && slot.version_tag == VersionTag(type);
  if (cached && slot.plain_new >= 0) return slot.plain_new == 1;
  bool plain = ComputePlainNamedTupleNew(type);
  // Its attribute lookup may run user code (a metaclass __getattribute__)
  // that gives this slot to another type: store only into our own entry.
  if (cached && slot.type == type && slot.version_tag == VersionTag(type)) {
    slot.plain_new = plain ? 1 : 0;
  }
  return plain;
}

namespace {

int ComputeIsNamedTupleClass(PyTypeObject* type) {
  // torch: issubclass(cls, tuple), `_fields` a tuple of exact str, `_make` and
  // `_asdict` callable.
  PyObject* cls = reinterpret_cast<PyObject*>(type);
  PyObject* fields = PyObject_GetAttr(cls, g_builtins.str_fields);
  if (fields == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
  }
  bool ok = PyTuple_Check(fields);
  for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(fields); ++i) {
    ok = PyUnicode_CheckExact(PyTuple_GET_ITEM(fields, i));
  }
  Py_DECREF(fields);
  return ok && IsCallableAttr(cls, g_builtins.str_make) &&
         IsCallableAttr(cls, g_builtins.str_asdict);
}

}  // namespace

bool RegisterNode(PyObject* type, PyObject* flatten_fn, PyObject* unflatten_fn,
                  PyObject* flatten_with_keys_fn) {
  Registration* replaced = nullptr;
#if CPYTREE_FREE_THREADED
  Reclaimed reclaimed;
#endif
  {
    ft::MutexLock lock(&writer_mutex);
    PyTypeObject* t = reinterpret_cast<PyTypeObject*>(type);
    auto next = std::make_unique<RegistryMap>(*g_map.load(std::memory_order_acquire));
    auto it = next->find(t);
    if (it != next->end() && it->second->kind != NodeKind::kCustom) {
      // OrderedDict/defaultdict/deque are handled natively; torch registers
      // them itself, so a re-registration from a mirrored registry is a no-op.
      return true;
    }
    if (it != next->end()) replaced = const_cast<Registration*>(it->second);
    if (t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type || t == &PyBool_Type ||
        t == &PyComplex_Type) {
      g_scalar_registered.store(true);
    }
    (*next)[t] = NewRegistration(NodeKind::kCustom, type, flatten_fn, unflatten_fn,
                                 flatten_with_keys_fn == Py_None ? nullptr : flatten_with_keys_fn);
#if CPYTREE_FREE_THREADED
    Publish(std::move(next), replaced, &reclaimed);
#else
    Publish(std::move(next));
#endif
  }
#if CPYTREE_FREE_THREADED
  FreeReclaimed(&reclaimed);
#else
  FreeRegistration(replaced);
#endif
  return true;
}

bool UnregisterNode(PyObject* type) {
  Registration* removed = nullptr;
#if CPYTREE_FREE_THREADED
  Reclaimed reclaimed;
#endif
  {
    ft::MutexLock lock(&writer_mutex);
    PyTypeObject* t = reinterpret_cast<PyTypeObject*>(type);
    auto next = std::make_unique<RegistryMap>(*g_map.load(std::memory_order_acquire));
    auto it = next->find(t);
    if (it == next->end() || it->second->kind != NodeKind::kCustom) {
      PyErr_SetObject(PyExc_KeyError, type);
      return false;
    }
    removed = const_cast<Registration*>(it->second);
    next->erase(it);
#if CPYTREE_FREE_THREADED
    Publish(std::move(next), removed, &reclaimed);
#else
    Publish(std::move(next));
#endif
  }
#if CPYTREE_FREE_THREADED
  FreeReclaimed(&reclaimed);
#else
  FreeRegistration(removed);
#endif
  return true;
}

PyObject* PyRegisterNode(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError,
                    "_register_node(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)");
    return nullptr;
  }
  if (!PyType_Check(args[0])) {
    PyErr_Format(PyExc_TypeError, "expected a type, got %R", args[0]);
    return nullptr;
  }
  if (!PyCallable_Check(args[1]) || !PyCallable_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "flatten_fn and unflatten_fn must be callable");
    return nullptr;
  }
  if (!RegisterNode(args[0], args[1], args[2], args[3])) return nullptr;
  Py_RETURN_NONE;
}

PyObject* PyUnregisterNode(PyObject*, PyObject* arg) {
  if (!PyType_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "expected a type, got %R", arg);
    return nullptr;
  }
  if (!UnregisterNode(arg)) return nullptr;
  Py_RETURN_NONE;
}

}  // namespace cpytree
