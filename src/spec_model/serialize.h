// treespec_dumps / treespec_loads of the engine (loads: deserialize.h): protocol-1 JSON, byte for
// byte what torch.utils._pytree writes (see python/cpytree/_serialization.py,
// the reference, for the format and the rules on untrusted input).
//
// Both are fast paths in front of the pure-Python reference: the engine
// handles engine specs and well-formed text natively and hands anything
// else to the reference functions it was given (`_set_serialization`):
//   - dumps: a spec that is no engine TreeSpec, an unusual protocol
//     argument, a node type without a usable registration (the reference
//     raises torch's error); a context the native writer does not cover
//     (objects other than None/bool/int/float/str/list/tuple/dict, deep or
//     cyclic values) is written by Python's json for that one context.
//   - loads: a non-str argument, text the JSON parser (simdjson) rejects or
//     any malformed spec: the reference loads the text again and returns
//     what it returns or raises its exact error. A context hook that raises
//     propagates at once, as in the reference.
// The registry of record is Python's (`SUPPORTED_SERIALIZED_TYPES`,
// `SERIALIZED_TYPE_TO_PYTHON_TYPE`); both functions read it on every call.
//
//   _C._set_serialization(state)   # once, on first use (cpytree/__init__.py)
//   text = _C.treespec_dumps(spec)
//   spec = _C.treespec_loads(text)
#ifndef CPYTREE_SRC_SERIALIZE_H_
#define CPYTREE_SRC_SERIALIZE_H_

#include <atomic>
#include <string>

#include "base/common.h"

namespace cpytree {

// The Python objects the serializer needs, set by _set_serialization on the
// first dumps/loads (SerializationReady) and kept. Strong references.
struct SerializationState {
  PyObject* supported_serialized_types;      // dict: type -> _SerializeNodeDef
  PyObject* serialized_type_to_python_type;  // dict: name -> type
  PyObject* no_name;                         // "NO_SERIALIZED_TYPE_NAME_FOUND"
  PyObject* namedtuple_serialize;            // builtin hooks, recognised by identity
  PyObject* namedtuple_deserialize;
  PyObject* defaultdict_serialize;
  PyObject* enum_object_hook;    // json object_hook of hookless contexts
  PyObject* fallback_dumps;      // reference treespec_dumps(spec, protocol)
  PyObject* fallback_loads;      // reference loads, uncached
  PyObject* serialize_node_def;  // (type) -> _SerializeNodeDef or raises
  PyObject* context_json;        // (context) -> json.dumps(ctx, EnumEncoder)
  PyObject* dumpable_json;       // (value) -> json of asdict'ed value
};
// The state in use (published whole by _set_serialization, never freed).
// Read it only after SerializationReady() returned true.
extern std::atomic<const SerializationState*> g_serial_state;
inline const SerializationState& Serial() {
  return *g_serial_state.load(std::memory_order_acquire);
}

// Appends `s` as a JSON string literal as json.dumps writes it
// (ensure_ascii: every code point outside printable ASCII as \uXXXX).
void AppendJsonStr(std::string* out, PyObject* s);

// True when the state is set: on first use it calls the loader the package
// handed over (SetSerializationLoader), which loads cpytree._serialization.
// False with a Python error if that fails.
bool SerializationReady();

// The callable returning the state on first use (given once by the package:
// _set_loaders). Keeps a reference.
void SetSerializationLoader(PyObject* loader);

// _set_serialization(state: tuple, /)
PyObject* PySetSerialization(PyObject*, PyObject* state);
CPYTREE_FASTCALL(PyTreespecDumps);  // treespec_dumps(treespec, protocol=None)

}  // namespace cpytree

#endif  // CPYTREE_SRC_SERIALIZE_H_
