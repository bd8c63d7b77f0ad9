// Key entries: the key classes (SequenceKey, MappingKey, GetAttrKey: cpytree._keys,
// loaded on the first with-path call, or torch's after install()), the keys made
// from them, the flatten_with_keys_fn call, keystr and key_get.
#ifndef CPYTREE_SRC_GROUND_KEY_ENTRIES_H_
#define CPYTREE_SRC_GROUND_KEY_ENTRIES_H_

#include <vector>

#include "base/common.h"
#include "ground/registry.h"

namespace cpytree {

// Which key classes the with-path operations of this thread build: cpytree's
// own (cpytree._keys) or torch's (torch.utils._pytree's, for the functions
// install() swaps into torch). Every with-path entry point opens a scope for
// its call; the previous choice comes back when it closes, since user code
// run mid-traversal (is_leaf, flatten_with_keys_fn) may call the other kind.
enum class KeyFlavor { kOwn, kTorch };
class KeyScope {
 public:
  explicit KeyScope(KeyFlavor flavor);
  ~KeyScope();
  KeyScope(const KeyScope&) = delete;
  KeyScope& operator=(const KeyScope&) = delete;

 private:
  void* saved_;  // the thread's previous key classes
};

// Whether this thread's key classes (its KeyScope's flavour) are set:
// cpytree's own are loaded on first use. False with an exception set.
bool KeyTypesReady();

// The Make*Key functions build keys of the scope's classes.
// SequenceKey(i) (new reference); small indices are cached (keys are immutable).
PyObject* MakeSequenceKey(Py_ssize_t i);
// MappingKey(key) (new reference).
PyObject* MakeMappingKey(PyObject* key);
// GetAttrKey(cls._fields[i]) for a namedtuple class (new reference).
PyObject* MakeFieldKey(PyObject* cls, Py_ssize_t i);
// cls._fields (new reference): read once per namedtuple node, as torch does.
PyObject* FieldsOf(PyObject* cls);
// GetAttrKey(fields[i]) (new reference); keys of str names are cached.
PyObject* MakeFieldKeyAt(PyObject* fields, Py_ssize_t i);
// ((*path), leaf) (new reference).
PyObject* MakePathPair(const std::vector<PyObject*>& path, PyObject* leaf);
// Calls reg->flatten_with_keys_fn(obj) as torch's _generate_key_paths does
// and splits its `(key, child)` pairs into two new lists of equal length,
// private to the caller. ValueError (torch's text) when the type has no such
// function. The function's context is dropped, as torch drops it.
bool CallFlattenWithKeys(const Registration* reg, PyObject* obj, Ref* keys, Ref* children);

// keystr(kp): the text of a key path.
PyObject* PyKeystr(PyObject*, PyObject* kp);
// key_get(obj, kp): the subtree of obj at key path kp.
PyObject* PyKeyGet(PyObject*, PyObject* const* args, Py_ssize_t nargs);
// _set_torch_key_types(SequenceKey, MappingKey, GetAttrKey): torch's classes,
// for PyTorchTreeFlattenWithPath and PyTorchTreeLeavesWithPath (flatten.h).
PyObject* PySetTorchKeyTypes(PyObject*, PyObject* const* args, Py_ssize_t nargs);
// The callable returning cpytree's own key classes on the first with-path
// call (given once by the package: _set_loaders). Keeps a reference.
void SetKeysLoader(PyObject* loader);

}  // namespace cpytree

#endif  // CPYTREE_SRC_GROUND_KEY_ENTRIES_H_
