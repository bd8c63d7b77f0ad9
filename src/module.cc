// Module init of cpytree._C and its method table.
#include <chrono>
#include <thread>

#include "base/ft.h"
#include "ground/children.h"
#include "ground/intern.h"
#include "ground/key_entries.h"
#include "ground/registry.h"
#include "spec_model/deserialize.h"
#include "spec_model/serialize.h"
#include "spec_model/spec_compare.h"
#include "spec_model/torch_interop.h"
#include "traversals/flatten.h"
#include "traversals/iter.h"
#include "traversals/map.h"
#include "traversals/spec_walk.h"
#include "traversals/unflatten.h"
#include "treespec.h"

namespace cpytree {
namespace {

#if PY_VERSION_HEX < 0x030B0000
// CPython 3.10 only: lets the daemon threads still waiting for the GIL leave
// while the interpreter is alive. 3.10's take_gil, in a daemon thread that
// asked for the GIL (SET_GIL_DROP_REQUEST) before finalization began and
// then times out waiting, resets that request through the interpreter state
// before exiting (python/cpython#96387; 3.10.13 has it). When the main
// thread got through Py_FinalizeEx without giving the GIL up, that thread
// times out after the interpreter state was freed: a use after free, which
// faults when glibc's free() wrote null over the state's `runtime` field
// (core dumps: SIGSEGV at take_gil -> RESET_GIL_DROP_REQUEST ->
// COMPUTE_EVAL_BREAKER, runtime == NULL, main thread already in exit()).
// CPython alone takes that path as well (uprobes, the pure-Python reference:
// 2 exits in 150, no fault there); whether it faults depends on the heap.
//
// An ExitDrain is put in this module's dict by the atexit hook when other
// Python threads exist. The dict is cleared by finalize_modules, after
// finalization began (no thread but this one may run Python again) and
// before the interpreter state is freed: its dealloc gives the GIL up for
// two switch intervals. Each waiting thread then takes it, sees that it must
// exit and leaves by take_gil's other path (drop_gil, pthread_exit), with
// the interpreter state intact; none is left waiting to time out after the
// free. Costs ~10 ms at exit, on 3.10, only when other threads are alive.
struct ExitDrainObject {
  PyObject_HEAD
};

void ExitDrainDealloc(PyObject* self) {
  if (_Py_IsFinalizing()) {
    auto wait = std::chrono::microseconds(2 * _PyEval_GetSwitchInterval());
    PyThreadState* state = PyEval_SaveThread();
    std::this_thread::sleep_for(wait);
    PyEval_RestoreThread(state);
  }
  Py_TYPE(self)->tp_free(self);
}

PyTypeObject ExitDrainType = {PyVarObject_HEAD_INIT(nullptr, 0) "cpytree._C._ExitDrain"};

// Puts an ExitDrain in the module's dict if a thread other than this one has
// a thread state (a daemon thread: non-daemon threads were joined before the
// atexit hooks ran). Errors are cleared: this is best effort.
void ArmExitDrain(PyObject* module) {
  PyThreadState* self = PyThreadState_Get();
  PyInterpreterState* interp = PyThreadState_GetInterpreter(self);
  bool others = false;
  for (PyThreadState* t = PyInterpreterState_ThreadHead(interp); t != nullptr;
       t = PyThreadState_Next(t)) {
    others = others || t != self;
  }
  if (!others) return;
  if (ExitDrainType.tp_dealloc == nullptr) {
    ExitDrainType.tp_basicsize = sizeof(ExitDrainObject);
    ExitDrainType.tp_flags = Py_TPFLAGS_DEFAULT;
    ExitDrainType.tp_dealloc = ExitDrainDealloc;
    if (PyType_Ready(&ExitDrainType) < 0) {
      PyErr_Clear();
      return;
    }
  }
  Ref drain(PyType_GenericAlloc(&ExitDrainType, 0));
  if (!drain || PyObject_SetAttrString(module, "_exit_drain", drain.get()) < 0) PyErr_Clear();
}
#endif

// atexit hook: from here on destructors check that they hold the GIL (common.h).
PyObject* PyMarkExiting([[maybe_unused]] PyObject* module, PyObject*) {
  g_exiting_thread.store(PyThread_get_thread_ident());
  g_exiting.store(true);
#if PY_VERSION_HEX < 0x030B0000
  ArmExitDrain(module);
#endif
  Py_RETURN_NONE;
}

PyObject* PyInternTableSize(PyObject*, PyObject*) { return PyLong_FromSsize_t(InternTableSize()); }

// _set_loaders(keys, serialization): what the engine loads from the package
// on first use, handed over once (cpytree._engine) so the engine never
// imports the package: keys() returns the key classes, serialization() the
// serialization state.
PyObject* PySetLoaders(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || PyCallable_Check(args[0]) == 0 || PyCallable_Check(args[1]) == 0) {
    PyErr_SetString(PyExc_TypeError, "_set_loaders: expected two callables");
    return nullptr;
  }
  SetKeysLoader(args[0]);
  SetSerializationLoader(args[1]);
  Py_RETURN_NONE;
}

// Every entry point is CPYTREE_GUARDED (common.h): no C++ exception reaches
// CPython.
constexpr int kFastKw = METH_FASTCALL | METH_KEYWORDS;

PyMethodDef kModuleMethods[] = {
    {"tree_flatten", CPYTREE_GUARDED(PyTreeFlatten), kFastKw,
     "tree_flatten(tree, is_leaf=None)\n--\n\n"
     "Flattens a pytree into a list of leaves and a TreeSpec."},
    {"tree_leaves", CPYTREE_GUARDED(PyTreeLeaves), kFastKw,
     "tree_leaves(tree, is_leaf=None)\n--\n\nThe leaves of a pytree (builds no spec)."},
    {"arg_tree_leaves", CPYTREE_GUARDED(PyArgTreeLeaves), kFastKw,
     "arg_tree_leaves(*args, **kwargs)\n--\n\n"
     "The leaves of the positional arguments, then of the keyword arguments' values."},
    {"tree_structure", CPYTREE_GUARDED(PyTreeStructure), kFastKw,
     "tree_structure(tree, is_leaf=None)\n--\n\nThe TreeSpec of a pytree."},
    {"tree_is_leaf", CPYTREE_GUARDED(PyTreeIsLeaf), kFastKw,
     "tree_is_leaf(tree, is_leaf=None)\n--\n\nWhether a pytree is a leaf."},
    {"tree_iter", CPYTREE_GUARDED(PyTreeIter), kFastKw,
     "tree_iter(tree, is_leaf=None)\n--\n\n"
     "A lazy iterator over the leaves of a pytree (visits nodes as leaves are consumed)."},
    {"tree_unflatten", CPYTREE_GUARDED(PyTreeUnflatten), kFastKw,
     "tree_unflatten(leaves, treespec)\n--\n\n"
     "Builds a pytree from leaves and a TreeSpec (inverse of tree_flatten)."},
    {"tree_map", CPYTREE_GUARDED(PyTreeMap), kFastKw,
     "tree_map(func, tree, *rests, is_leaf=None)\n--\n\n"
     "Maps func over the leaves of tree (and the matching subtrees of rests)."},
    {"tree_map_", CPYTREE_GUARDED(PyTreeMapInplace), kFastKw,
     "tree_map_(func, tree, *rests, is_leaf=None)\n--\n\n"
     "Calls func on each leaf for its side effects and returns tree."},
    {"tree_map_only", CPYTREE_GUARDED(PyTreeMapOnly), kFastKw,
     "tree_map_only(type_or_types_or_pred, /, func, tree, is_leaf=None)\n--\n\n"
     "Maps func over the leaves selected by a type, tuple of types or predicate."},
    {"tree_map_only_", CPYTREE_GUARDED(PyTreeMapOnlyInplace), kFastKw,
     "tree_map_only_(type_or_types_or_pred, /, func, tree, is_leaf=None)\n--\n\n"
     "Calls func on the leaves selected by a type, tuple of types or predicate; returns tree."},
    {"tree_flatten_spec", CPYTREE_GUARDED(PyTreeFlattenSpec), kFastKw,
     "tree_flatten_spec(pytree, spec, registry=None)\n--\n\n"
     "torch.fx._pytree.tree_flatten_spec: the leaves of pytree at spec's leaves. registry:\n"
     "torch.fx._pytree.SUPPORTED_NODES, for spec node types it knows beyond the builtins."},
    {"tree_flatten_with_path", CPYTREE_GUARDED(PyTreeFlattenWithPath), kFastKw,
     "tree_flatten_with_path(tree, is_leaf=None)\n--\n\n"
     "Flattens a pytree into (key path, leaf) pairs and a TreeSpec."},
    {"tree_leaves_with_path", CPYTREE_GUARDED(PyTreeLeavesWithPath), kFastKw,
     "tree_leaves_with_path(tree, is_leaf=None)\n--\n\nThe (key path, leaf) pairs of a pytree."},
    {"_torch_tree_flatten_with_path", CPYTREE_GUARDED(PyTorchTreeFlattenWithPath), kFastKw,
     "_torch_tree_flatten_with_path(tree, is_leaf=None)\n--\n\n"
     "torch.utils._pytree.tree_flatten_with_path on the engine: torch's key classes\n"
     "(_set_torch_key_types), torch's order of calls (flatten, then key paths)."},
    {"_torch_tree_leaves_with_path", CPYTREE_GUARDED(PyTorchTreeLeavesWithPath), kFastKw,
     "_torch_tree_leaves_with_path(tree, is_leaf=None)\n--\n\n"
     "torch.utils._pytree.tree_leaves_with_path on the engine, with torch's key classes."},
    {"tree_map_with_path", CPYTREE_GUARDED(PyTreeMapWithPath), kFastKw,
     "tree_map_with_path(func, tree, *rests, is_leaf=None)\n--\n\n"
     "Maps func(keypath, leaf, *rest_leaves) over a pytree."},
    {"treespec_dumps", CPYTREE_GUARDED(PyTreespecDumps), kFastKw,
     "treespec_dumps(treespec, protocol=None)\n--\n\n"
     "The protocol-1 JSON text of a TreeSpec, byte-identical to torch's."},
    {"treespec_loads", CPYTREE_GUARDED(PyTreespecLoads), kFastKw,
     "treespec_loads(serialized)\n--\n\n"
     "The TreeSpec that treespec_dumps wrote as `serialized` (uncached)."},
    {"_set_serialization", CPYTREE_GUARDED(PySetSerialization), METH_O,
     "_set_serialization(state, /)\n--\n\n"
     "Hands the Python registry tables and reference functions to dumps/loads."},
    {"keystr", CPYTREE_GUARDED(PyKeystr), METH_O,
     "keystr(kp)\n--\n\nThe text of a key path, e.g. \"[0]['a'].x\"."},
    {"key_get", CPYTREE_GUARDED(PyKeyGet), METH_FASTCALL,
     "key_get(obj, kp)\n--\n\nThe subtree of obj at key path kp."},
    {"_set_loaders", CPYTREE_GUARDED(PySetLoaders), METH_FASTCALL,
     "_set_loaders(keys, serialization, /)\n--\n\n"
     "Hands the engine the package's loaders of its key classes and serialization state."},
    {"_set_torch_key_types", CPYTREE_GUARDED(PySetTorchKeyTypes), METH_FASTCALL,
     "_set_torch_key_types(SequenceKey, MappingKey, GetAttrKey, /)\n--\n\n"
     "install(): torch.utils._pytree's key entry classes, for _torch_tree_*_with_path."},
    {"_set_constant_types", CPYTREE_GUARDED(PySetConstantTypes), METH_O,
     "_set_constant_types(classes, /)\n--\n\n"
     "Context classes of register_constant nodes (hash(spec) hashes their .value)."},
    {"_set_torch_spec_classes", CPYTREE_GUARDED(PySetTorchSpecClasses), METH_FASTCALL,
     "_set_torch_spec_classes(TreeSpec, LeafSpec, treespec_leaf, ConstantNode, /)\n--\n\n"
     "install(): torch's spec classes (all None to clear); see torch_interop.h."},
    {"_set_torch_pickling", CPYTREE_GUARDED(PySetTorchPickling), METH_O,
     "_set_torch_pickling(flag, /)\n--\n\nPickle specs in torch's form (install()) or cpytree's."},
    {"_find_bound_in_modules", CPYTREE_GUARDED(PyFindBoundInModules), METH_FASTCALL,
     "_find_bound_in_modules(modules, objects, names, prefixes, /)\n--\n\n"
     "[(name, key), ...]: the items of the modules of the dict `modules` named in `names`\n"
     "or starting with one of `prefixes` whose value is one of `objects` (by identity);\n"
     "install()'s torch module filter and scan in one call."},
    {"_set_known_flattens", CPYTREE_GUARDED(PySetKnownFlattens), METH_FASTCALL,
     "_set_known_flattens(dict_like, list_like, /)\n--\n\n"
     "Flatten functions (tuples) known to return exactly what dict / list flatten returns;\n"
     "the engine computes their result itself. install() names torch.fx's immutable ones."},
    {"_register_node", CPYTREE_GUARDED(PyRegisterNode), METH_FASTCALL,
     "_register_node(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn, /)\n--\n\n"
     "Mirrors one registration of the Python registry into the engine."},
    {"_unregister_node", CPYTREE_GUARDED(PyUnregisterNode), METH_O,
     "_unregister_node(cls, /)\n--\n\nRemoves a mirrored registration."},
    {"_mark_exiting", CPYTREE_GUARDED(PyMarkExiting), METH_NOARGS,
     "_mark_exiting()\n--\n\nInterpreter shutdown has begun (registered with atexit)."},
    {"_intern_table_size", CPYTREE_GUARDED(PyInternTableSize), METH_NOARGS,
     "_intern_table_size()\n--\n\nNumber of live interned specs (for tests)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "cpytree._C",
    "The C++ pytree engine of cpytree. Use the `cpytree` package, not this module.",
    -1,
    kModuleMethods,
};

}  // namespace
}  // namespace cpytree

PyMODINIT_FUNC PyInit__C() {  // NOLINT(bugprone-reserved-identifier): CPython names it
  using namespace cpytree;
  if (!InitRegistry() || !InitTreeSpecType() || !InitTreeIterType()) return nullptr;
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
#if CPYTREE_FREE_THREADED
  // Runs without the GIL: every piece of shared state is guarded (ft.h).
  if (PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
#endif
  Py_INCREF(&TreeSpecType);
  if (PyModule_AddObject(m, "TreeSpec", reinterpret_cast<PyObject*>(&TreeSpecType)) < 0) {
    Py_DECREF(&TreeSpecType);
    Py_DECREF(m);
    return nullptr;
  }
  Py_INCREF(LeafSpec());
  if (PyModule_AddObject(m, "_LEAF_SPEC", LeafSpec()) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  // atexit hooks run before daemon threads are torn down (common.h).
  Ref atexit(PyImport_ImportModule("atexit"));
  Ref hook(atexit ? PyObject_GetAttrString(m, "_mark_exiting") : nullptr);
  Ref done(hook ? PyObject_CallMethod(atexit.get(), "register", "O", hook.get()) : nullptr);
  if (!done) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
