// Getting the children of one node, shared by flatten, map and flatten_up_to:
// calling a custom node's flatten function, snapshotting dict-like nodes.
#ifndef CPYTREE_SRC_CHILDREN_H_
#define CPYTREE_SRC_CHILDREN_H_

#include <atomic>
#include <vector>

#include "base/common.h"
#include "base/odict_layout.h"
#include "ground/registry.h"

namespace cpytree {

// Calls reg->flatten_fn(obj) and unpacks `children, context` as Python's
// tuple unpacking would (same errors). `children` becomes a list or tuple the
// caller owns (a list may still be shared with user code: re-check sizes;
// free-threaded builds give a tuple snapshot instead of a user's list).
bool CallCustomFlatten(const Registration* reg, PyObject* obj, Ref* children, Ref* context);

// Python-facing: _set_known_flattens(dict_like, list_like), tuples of flatten
// functions whose result CallCustomFlatten computes without calling them.
PyObject* PySetKnownFlattens(PyObject*, PyObject* const* args, Py_ssize_t nargs);

// Appends owned references to the keys and values of a dict-kind node in
// torch's order (insertion order; an OrderedDict's own order). `keys` may be
// null when only values are wanted.
bool SnapshotDict(PyObject* obj, NodeKind kind, std::vector<PyObject*>* keys,
                  std::vector<PyObject*>* values);

// The dict-kind node `kind` (dict, OrderedDict, or defaultdict(factory))
// mapping keys[k] to values[k] for k < n, inserted in order; keys and values
// borrowed; `factory` is used for defaultdict only. The one constructor of
// dict kinds for unflatten and map. New reference, or null with an exception.
PyObject* NewDictNode(NodeKind kind, PyObject* factory, PyObject* const* keys,
                      PyObject* const* values, std::size_t n);

// The tuple, list, deque and custom-node constructors of unflatten and map:
// each takes the n owned references values[0..n) (also on error) and returns
// a new reference, or null with an exception set.
PyObject* NewTupleNode(PyObject* const* values, std::size_t n);
PyObject* NewListNode(PyObject* const* values, std::size_t n);
PyObject* NewDequeNode(PyObject* const* values, std::size_t n, PyObject* maxlen);
// cls(*values) for a namedtuple class, consuming the n owned `values`; built
// directly when cls uses collections.namedtuple's own __new__
// (PlainNamedTupleNew), else by calling cls. New reference.
PyObject* NewNamedTuple(PyObject* cls, PyObject** values, Py_ssize_t n);
// reg->unflatten_fn(list(values), context); the function is held for the
// call (it may deregister its own type: registry.h).
PyObject* NewCustomNode(const Registration* reg, PyObject* const* values, std::size_t n,
                        PyObject* context);

// defaultdict's default_factory / deque's maxlen (new references).
PyObject* DefaultFactoryOf(PyObject* obj);
PyObject* MaxLenOf(PyObject* obj);

// Appends owned references to a deque's items.
bool SnapshotDeque(PyObject* obj, std::vector<PyObject*>* values);

// A private, immutable snapshot of a list or tuple `seq` (new reference): a
// tuple as is, a list copied. For loops that run user code (__hash__, __eq__,
// __str__) between reads of a sequence the user may also hold.
inline PyObject* FrozenSequence(PyObject* seq) {
  if (PyTuple_Check(seq)) {
    Py_INCREF(seq);
    return seq;
  }
  return PyList_AsTuple(seq);
}

}  // namespace cpytree

#endif  // CPYTREE_SRC_CHILDREN_H_
