// treespec_loads's first try: protocol-1 text in the shape treespec_dumps
// writes for builtin lists, tuples, dicts and OrderedDicts of plain ASCII
// string keys (a state dict, a batch of named tensors), read in one pass
// over the text with no DOM and no second parse of the contexts. Anything
// else is declined before any user code or hook ran, and the general path
// (deserialize.cc: simdjson, then the Python reference) decides.
//
//   PyObject* spec = nullptr;
//   switch (LoadsPlain(text, &spec)) { ... }  // kDeclined: try the general path
#ifndef CPYTREE_SRC_SPEC_MODEL_DESERIALIZE_PLAIN_H_
#define CPYTREE_SRC_SPEC_MODEL_DESERIALIZE_PLAIN_H_

#include <string_view>

#include "base/common.h"

namespace cpytree {

enum class PlainLoad {
  kOk,        // *result is the (interned) spec, a new reference
  kDeclined,  // not the plain shape: nothing observable happened
  kError,     // a Python exception is set (as the general path would raise it)
};

// The spec of the UTF-8 text `text` when it is plain protocol-1 text (see
// above); the result equals what the general path gives for the same text.
PlainLoad LoadsPlain(std::string_view text, PyObject** result);

}  // namespace cpytree

#endif  // CPYTREE_SRC_SPEC_MODEL_DESERIALIZE_PLAIN_H_
