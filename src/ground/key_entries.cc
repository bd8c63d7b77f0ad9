// Key entries (the key classes and the keys made from them, the
// flatten_with_keys_fn call), keystr and key_get. The with-path entry points
// built on the flatten traversal sit beside it (flatten_with_path.cc).
#include "ground/key_entries.h"

#include <atomic>

#include "base/ft.h"
#include "ground/children.h"

namespace cpytree {
namespace {

// A set of key classes and the keys made from them. Two sets exist:
// cpytree's own (cpytree._keys, loaded on the first with-path call) and
// torch's (torch.utils._pytree's, set by _set_torch_key_types when install()
// swaps torch's with-path functions). Each with-path entry point picks one
// for its call (KeyScope), per thread.
// With the GIL: one set per flavour, changed in place with the GIL held.
// Without it: a set is filled privately and published whole through the
// flavour's atomic pointer; a replaced set is kept (never freed: a call in
// another thread may be reading it; sets are given a few times per process).
// The caches in a set are filled by any thread: first store wins (atomic).
struct KeyClasses {
  PyObject* sequence = nullptr;
  PyObject* mapping = nullptr;
  PyObject* getattr = nullptr;
  // The single field of each key class when it can be set directly: the
  // classes are frozen one-field dataclasses whose __init__ only stores the
  // field, so allocating the object and storing the slot is what calling the
  // class does, minus the Python frame of the generated __init__ (which made
  // key paths slower than optree's). Null when the class does not qualify
  // (then the class is called). Checked once when the set is given.
  PyObject* sequence_field = nullptr;
  PyObject* mapping_field = nullptr;
  PyObject* getattr_field = nullptr;
  // SequenceKey(i) for i < kCachedIndices, made on first use and kept. Making
  // a key runs Python code, during which another thread may fill the same
  // slot: the first key stored stays.
  static constexpr Py_ssize_t kCachedIndices = 256;
  PyObject* index_keys[kCachedIndices] = {};
  // GetAttrKey(name) by exact-str field name, made on first use and kept
  // (keys are immutable); bounded, so classes made at run time cannot grow it
  // without end. Cleared when the set is given again.
  PyObject* field_keys = nullptr;  // dict
};

KeyClasses g_own_initial;
KeyClasses g_torch_initial;
std::atomic<KeyClasses*> g_own_keys{&g_own_initial};
std::atomic<KeyClasses*> g_torch_keys{&g_torch_initial};
// The flavour the with-path operation running on this thread builds from.
thread_local std::atomic<KeyClasses*>* t_keys = &g_own_keys;

// The current set of this thread's flavour.
KeyClasses& Keys() { return *t_keys->load(std::memory_order_acquire); }

constexpr Py_ssize_t kMaxFieldKeys = 4096;

PyObject* SetKeyClasses(std::atomic<KeyClasses*>* flavour, const char* name, PyObject* const* args,
                        Py_ssize_t nargs);

// The package's loader of its own key classes (_set_loaders, once at
// `import cpytree`): called with no arguments, it returns (SequenceKey,
// MappingKey, GetAttrKey), loading cpytree._keys on its first call. A
// replaced loader is kept (never freed: a call in another thread may hold it).
std::atomic<PyObject*> g_keys_loader{nullptr};

// cpytree's own key classes, on first use: `import cpytree` leaves
// cpytree._keys unloaded (three frozen dataclasses are a sixth of the
// import), so the first with-path call asks the loader, with the GIL held.
bool LoadOwnKeyClasses() {
  PyObject* loader = g_keys_loader.load(std::memory_order_acquire);
  if (loader == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "cpytree._C: the key classes' loader is not set");
    return false;
  }
  Ref classes(PyObject_CallNoArgs(loader));
  if (!classes) return false;
  if (g_own_keys.load(std::memory_order_acquire)->sequence != nullptr) {
    return true;  // loaded by another thread meanwhile
  }
  if (!PyTuple_Check(classes.get()) || PyTuple_GET_SIZE(classes.get()) != 3) {
    PyErr_SetString(PyExc_TypeError, "cpytree._C: the key classes' loader must return 3 classes");
    return false;
  }
  PyObject* args[3];
  for (Py_ssize_t i = 0; i < 3; ++i) args[i] = PyTuple_GET_ITEM(classes.get(), i);
  Ref done(SetKeyClasses(&g_own_keys, "the key classes' loader", args, 3));
  return static_cast<bool>(done);
}

}  // namespace

bool KeyTypesReady() {
  if (CPYTREE_LIKELY(Keys().sequence != nullptr)) return true;
  if (t_keys == &g_own_keys) return LoadOwnKeyClasses();
  PyErr_SetString(PyExc_RuntimeError,
                  "cpytree._C: torch's key types are not set (_set_torch_key_types)");
  return false;
}

namespace {

PyObject* FieldOf(PyObject* cls) {
  const KeyClasses& k = Keys();
  return cls == k.sequence  ? k.sequence_field
         : cls == k.mapping ? k.mapping_field
                            : k.getattr_field;
}

PyObject* DirectKey(PyObject* cls, PyObject* field, PyObject* arg) {
  PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls);
  PyObject* key = type->tp_alloc(type, 0);
  if (key == nullptr) return nullptr;
  if (PyObject_GenericSetAttr(key, field, arg) < 0) {  // object.__setattr__: frozen-safe
    Py_DECREF(key);
    return nullptr;
  }
  return key;
}

PyObject* CallKeyType(PyObject* cls, PyObject* arg) {
  if (!KeyTypesReady()) return nullptr;
  PyObject* field = FieldOf(cls);
  return field != nullptr ? DirectKey(cls, field, arg) : PyObject_CallOneArg(cls, arg);
}

// The one field name of `cls` if building it directly equals calling it, else
// null (no exception).
PyObject* DirectField(PyObject* cls, PyObject* probe) {
  if (!PyType_Check(cls)) return nullptr;
  PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls);
  if (type->tp_new != PyBaseObject_Type.tp_new || Py_TYPE(cls)->tp_call != PyType_Type.tp_call) {
    return nullptr;
  }
  Ref fields(PyObject_GetAttrString(cls, "__dataclass_fields__"));
  Ref post_init(fields ? PyObject_GetAttrString(cls, "__post_init__") : nullptr);
  PyErr_Clear();
  if (!fields || post_init || !PyDict_Check(fields.get()) || PyDict_GET_SIZE(fields.get()) != 1) {
    return nullptr;
  }
  PyObject* name;
  {
    ft::CriticalSection cs(fields.get());
    Py_ssize_t pos = 0;
    PyObject* value;
    if (!PyDict_Next(fields.get(), &pos, &name, &value)) return nullptr;
    Py_INCREF(name);
  }
  Ref name_held(name);
  // The proof: both ways give equal objects.
  Ref called(PyObject_CallOneArg(cls, probe));
  Ref direct(called ? DirectKey(cls, name, probe) : nullptr);
  int same = direct ? PyObject_RichCompareBool(called.get(), direct.get(), Py_EQ) : -1;
  PyErr_Clear();
  if (same != 1) return nullptr;
  return name_held.release();
}

// Makes the classes args[0..2] (SequenceKey, MappingKey, GetAttrKey) the
// flavour's set.
PyObject* SetKeyClasses(std::atomic<KeyClasses*>* flavour, const char* name, PyObject* const* args,
                        Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_Format(PyExc_TypeError, "%s(SequenceKey, MappingKey, GetAttrKey)", name);
    return nullptr;
  }
#if CPYTREE_FREE_THREADED
  KeyClasses* k = new KeyClasses();  // published below, when complete
#else
  KeyClasses* k = flavour->load(std::memory_order_relaxed);  // in place, under the GIL
#endif
  PyObject** slots[] = {&k->sequence, &k->mapping, &k->getattr};
  for (int i = 0; i < 3; ++i) {
    Py_INCREF(args[i]);
    Py_XSETREF(*slots[i], args[i]);
  }
  for (PyObject*& cached : k->index_keys) Py_CLEAR(cached);
  Py_XSETREF(k->field_keys, PyDict_New());
  if (k->field_keys == nullptr) return nullptr;
  Ref probe(PyUnicode_FromString("probe"));
  if (!probe) return nullptr;
  Py_XSETREF(k->sequence_field, DirectField(k->sequence, probe.get()));
  Py_XSETREF(k->mapping_field, DirectField(k->mapping, probe.get()));
  Py_XSETREF(k->getattr_field, DirectField(k->getattr, probe.get()));
#if CPYTREE_FREE_THREADED
  flavour->store(k, std::memory_order_release);
#endif
  Py_RETURN_NONE;
}

}  // namespace

KeyScope::KeyScope(KeyFlavor flavor) : saved_(t_keys) {
  t_keys = flavor == KeyFlavor::kTorch ? &g_torch_keys : &g_own_keys;
}

KeyScope::~KeyScope() { t_keys = static_cast<std::atomic<KeyClasses*>*>(saved_); }

PyObject* MakeSequenceKey(Py_ssize_t i) {
  if (!KeyTypesReady()) return nullptr;
  KeyClasses& k = Keys();
  if (i < KeyClasses::kCachedIndices) {
    PyObject* cached = ft::LoadAcquire(&k.index_keys[i]);
    if (cached != nullptr) {
      Py_INCREF(cached);
      return cached;
    }
  }
  Ref index(PyLong_FromSsize_t(i));
  if (!index) return nullptr;
  PyObject* key = CallKeyType(k.sequence, index.get());
  if (key != nullptr && i < KeyClasses::kCachedIndices) {
    Py_INCREF(key);
    if (!ft::PublishIfEmpty(&k.index_keys[i], key)) Py_DECREF(key);  // another was first
  }
  return key;
}

PyObject* MakeMappingKey(PyObject* key) {
  if (!KeyTypesReady()) return nullptr;
  return CallKeyType(Keys().mapping, key);
}

PyObject* FieldsOf(PyObject* cls) { return PyObject_GetAttr(cls, g_builtins.str_fields); }

PyObject* MakeFieldKeyAt(PyObject* fields, Py_ssize_t i) {
  if (!KeyTypesReady()) return nullptr;
  Ref name(PySequence_GetItem(fields, i));
  if (!name) return nullptr;
  KeyClasses& k = Keys();
  bool cacheable = PyUnicode_CheckExact(name.get()) && k.field_keys != nullptr;
  if (cacheable) {
    PyObject* key = nullptr;  // str: no user code
    int found = ft::DictGetItemRef(k.field_keys, name.get(), &key);
    if (found != 0) return key;  // the key, or null with the error
  }
  PyObject* key = CallKeyType(k.getattr, name.get());
  if (key != nullptr && cacheable && PyDict_Size(k.field_keys) < kMaxFieldKeys &&
      PyDict_SetItem(k.field_keys, name.get(), key) < 0) {
    Py_DECREF(key);
    return nullptr;
  }
  return key;
}

PyObject* MakeFieldKey(PyObject* cls, Py_ssize_t i) {
  Ref fields(FieldsOf(cls));
  if (!fields) return nullptr;
  return MakeFieldKeyAt(fields.get(), i);
}

PyObject* MakePathPair(const std::vector<PyObject*>& path, PyObject* leaf) {
  Ref kp(PyTuple_New(static_cast<Py_ssize_t>(path.size())));
  if (!kp) return nullptr;
  for (std::size_t k = 0; k < path.size(); ++k) {
    Py_INCREF(path[k]);
    PyTuple_SET_ITEM(kp.get(), k, path[k]);
  }
  return PyTuple_Pack(2, kp.get(), leaf);
}

bool CallFlattenWithKeys(const Registration* reg, PyObject* obj, Ref* keys, Ref* children) {
  if (reg->flatten_with_keys_fn == nullptr) {
    PyErr_Format(PyExc_ValueError,
                 "Did not find a flatten_with_keys_fn for type: %R. Please pass a "
                 "flatten_with_keys_fn argument to register_pytree_node.",
                 reg->type);
    return false;
  }
  Registration with_keys = *reg;
  with_keys.flatten_fn = reg->flatten_with_keys_fn;
  Ref live_children, context;  // torch drops this context: the spec's is flatten_fn's
  if (!CallCustomFlatten(&with_keys, obj, &live_children, &context)) return false;
  // Unpacking a pair below may run user code that mutates the returned list.
  Ref key_children(FrozenSequence(live_children.get()));
  if (!key_children) return false;
  Py_ssize_t m = PySequence_Fast_GET_SIZE(key_children.get());
  Ref k_list(PyList_New(m)), c_list(PyList_New(m));
  if (!k_list || !c_list) return false;
  for (Py_ssize_t k = 0; k < m; ++k) {
    // Each entry unpacks as `k, c` in torch.
    Ref pair(PySequence_Tuple(PySequence_Fast_ITEMS(key_children.get())[k]));
    if (!pair) return false;
    if (PyTuple_GET_SIZE(pair.get()) != 2) {
      PyErr_Format(PyExc_ValueError,
                   "flatten_with_keys_fn of %R must return (key, child) pairs, got %R", reg->type,
                   pair.get());
      return false;
    }
    for (int j = 0; j < 2; ++j) {
      PyObject* o = PyTuple_GET_ITEM(pair.get(), j);
      Py_INCREF(o);
      PyList_SET_ITEM(j == 0 ? k_list.get() : c_list.get(), k, o);
    }
  }
  *keys = std::move(k_list);
  *children = std::move(c_list);
  return true;
}

PyObject* PySetTorchKeyTypes(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return SetKeyClasses(&g_torch_keys, "_set_torch_key_types", args, nargs);
}

void SetKeysLoader(PyObject* loader) {
  Py_INCREF(loader);
  g_keys_loader.store(loader, std::memory_order_release);
}

PyObject* PyKeystr(PyObject*, PyObject* kp) {
  Ref fast(PySequence_Fast(kp, "keystr: expected a key path (tuple of key entries)"));
  if (!fast) return nullptr;
  Ref seq(FrozenSequence(fast.get()));  // str() of an entry may mutate a list
  if (!seq) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  Ref parts(PyTuple_New(n));
  if (!parts) return nullptr;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* s = PyObject_Str(PySequence_Fast_ITEMS(seq.get())[k]);
    if (s == nullptr) return nullptr;
    PyTuple_SET_ITEM(parts.get(), k, s);
  }
  Ref empty(PyUnicode_FromString(""));
  return empty ? PyUnicode_Join(empty.get(), parts.get()) : nullptr;
}

PyObject* PyKeyGet(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "key_get(obj, kp)");
    return nullptr;
  }
  Ref fast(PySequence_Fast(args[1], "key_get: expected a key path (tuple of key entries)"));
  if (!fast) return nullptr;
  Ref seq(ft::StableSequence(fast.get()));  // free-threaded builds: a snapshot of a list
  if (!seq) return nullptr;
  Ref obj = Ref::Borrow(args[0]);
  Ref get(PyUnicode_InternFromString("get"));
  if (!get) return nullptr;
  for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq.get()); ++k) {
    // torch iterates the live key path: an entry's get() may shrink a list
    // path (the size is re-read) or drop the entry itself (held here).
    Ref entry = Ref::Borrow(PySequence_Fast_ITEMS(seq.get())[k]);
    PyObject* call_args[2] = {entry.get(), obj.get()};
    obj = Ref(PyObject_VectorcallMethod(get.get(), call_args, 2, nullptr));  // key.get(obj)
    if (!obj) return nullptr;
  }
  return obj.release();
}

}  // namespace cpytree
