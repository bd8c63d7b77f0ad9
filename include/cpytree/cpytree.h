// cpytree for C++: pytree specs, protocol-1 JSON and generic flatten/unflatten,
// header-only, pure C++17 (the one dependency is nlohmann-json).
//
// A C++ program that serves a model exported from Python reads the input and
// output specs written by `torch.utils._pytree.treespec_dumps`, flattens its
// inputs into leaves and rebuilds its outputs:
//
//   #include <cpytree/cpytree.h>
//
//   cpytree::TreeSpec out_spec = cpytree::Loads(out_spec_json);
//   std::vector<Tensor> outputs = RunModel(...);
//   cpytree::Tree<Tensor> result = cpytree::Unflatten(out_spec, std::move(outputs));
//
// Headers:
//   kind.h     node kinds shared with the CPython engine
//   value.h    cpytree::Value, the contexts a spec carries (dict keys, ...)
//   spec.h     cpytree::TreeSpec
//   json.h     Loads / Dumps (protocol 1, byte-identical to Python)
//   tree.h     cpytree::Tree<T>, a dynamic pytree
//   traits.h   NodeTraits / LeafTraits / KeyTraits for C++ types
//   flatten.h  Flatten / Unflatten / UnflattenAs / Map
//   errors.h   Error, ParseError, StructureError
//   version.h  CPYTREE_VERSION_MAJOR / _MINOR / _PATCH
#ifndef CPYTREE_CPYTREE_H_
#define CPYTREE_CPYTREE_H_

#include "cpytree/errors.h"   // IWYU pragma: export
#include "cpytree/flatten.h"  // IWYU pragma: export
#include "cpytree/flatten_spec.h"  // IWYU pragma: export
#include "cpytree/json.h"     // IWYU pragma: export
#include "cpytree/kind.h"     // IWYU pragma: export
#include "cpytree/spec.h"     // IWYU pragma: export
#include "cpytree/traits.h"   // IWYU pragma: export
#include "cpytree/tree.h"     // IWYU pragma: export
#include "cpytree/value.h"    // IWYU pragma: export
#include "cpytree/version.h"  // IWYU pragma: export

#endif  // CPYTREE_CPYTREE_H_
