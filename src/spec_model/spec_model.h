// torch's model of a spec over the engine's node array: the `type` and
// `context` torch reports per node, the TreeSpec(type, context, children)
// constructor, and the conversion of torch's own specs.
//
//   PyObject* type = NodeType(ViewOf(spec), i);        // new ref, None for a leaf
//   PyObject* spec = MakeSpec(list_type, Py_None, children);  // TreeSpec(...)
#ifndef CPYTREE_SRC_SPEC_MODEL_H_
#define CPYTREE_SRC_SPEC_MODEL_H_

#include "base/common.h"
#include "ground/spec_object.h"

namespace cpytree {

// The `type` torch reports for node `i` (None for a leaf). New reference.
PyObject* NodeType(SpecView v, std::int64_t i);
// The `context` torch reports for node `i` (a fresh list for dict keys). New ref.
PyObject* NodeContext(SpecView v, std::int64_t i);

// The node kind a TreeSpec `type` denotes (kCustom for any registered type).
NodeKind KindOfType(PyObject* type);
// Appends the context items of a node of `kind` with `arity` children, from
// torch's `context` object, checking it as TreeSpec(...) does. False with an
// exception.
bool AddRootItems(TraversalArena* b, NodeKind kind, PyObject* type, PyObject* context,
                  Py_ssize_t arity);

// TreeSpec(type, context, children_specs) as torch defines it. New reference.
PyObject* MakeSpec(PyObject* type, PyObject* context, PyObject* children);

// The engine spec equal to torch spec `obj` (children may be torch or engine
// specs, in any mix). Iterative: no C recursion whatever the depth; nesting
// of torch nodes deeper than IterativeDepthLimit() (or a cycle through `_children`)
// raises RecursionError. Reads `type`, `_context` and `_children` as torch's
// own methods do (user code may run: properties of a subclass). New ref.
PyObject* FromTorchSpec(PyObject* obj);

// An engine spec for `obj`: obj itself (new reference) if it is one, a
// conversion if it is a torch spec, else null with TypeError naming `what`.
PyObject* CoerceSpec(PyObject* obj, const char* what);

}  // namespace cpytree

#endif  // CPYTREE_SRC_SPEC_MODEL_H_
