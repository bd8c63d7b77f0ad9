// cpytree for C++: pytree specs, dynamic trees, traits for C++ types and
// flatten / unflatten / map, for C++ programs with no Python.
//
// Dependencies, exactly:
//   <cpytree/cpytree.h>  this header, the core: header-only, pure C++17, no
//                        dependency beyond the standard library. CMake target
//                        cpytree::core, which links nothing.
//   <cpytree/json.h>     protocol-1 Loads / Dumps (the JSON Python's
//                        `treespec_dumps` writes). Header-only too, but it
//                        parses with simdjson (a compiled library: link it)
//                        and nlohmann-json (header-only). CMake target
//                        cpytree::json, which links both.
//
// A C++ program that serves a model exported from Python (examples/aoti runs
// an AOTInductor package this way) reads the input and output specs, flattens
// its inputs against one and rebuilds its outputs with the other:
//
//   #include <cpytree/cpytree.h>
//   #include <cpytree/json.h>
//
//   cpytree::TreeSpec in_spec = cpytree::Loads(call_spec[0]);
//   cpytree::TreeSpec out_spec = cpytree::Loads(call_spec[1]);
//   std::vector<Tensor> flat = cpytree::FlattenSpec<Tensor>(in_spec, inputs);
//   cpytree::Tree<Tensor> result = cpytree::Unflatten(out_spec, RunModel(flat));
//
// Headers (all included here but json.h):
//   kind.h          node kinds shared with the CPython engine
//   value.h         cpytree::Value, the contexts a spec carries (dict keys, ...)
//   spec.h          cpytree::TreeSpec
//   tree.h          cpytree::Tree<T>, a dynamic pytree
//   traits.h        NodeTraits / LeafTraits / KeyTraits for C++ types
//   flatten.h       Flatten / Leaves / Structure / Unflatten / UnflattenAs / Map
//   flatten_against.h  FlattenSpec: check a value against a spec, collect its leaves
//   errors.h        Error, ParseError, StructureError
//   version.h       CPYTREE_VERSION_MAJOR / _MINOR / _PATCH
#ifndef CPYTREE_CPYTREE_H_
#define CPYTREE_CPYTREE_H_

#include "cpytree/errors.h"           // IWYU pragma: export
#include "cpytree/flatten.h"          // IWYU pragma: export
#include "cpytree/flatten_against.h"  // IWYU pragma: export
#include "cpytree/kind.h"             // IWYU pragma: export
#include "cpytree/spec.h"             // IWYU pragma: export
#include "cpytree/traits.h"           // IWYU pragma: export
#include "cpytree/tree.h"             // IWYU pragma: export
#include "cpytree/value.h"            // IWYU pragma: export
#include "cpytree/version.h"          // IWYU pragma: export

#endif  // CPYTREE_CPYTREE_H_
