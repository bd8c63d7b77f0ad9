// treespec_dumps in C++: one pre-order walk of the engine's post-order node
// array writing torch's protocol-1 JSON (see serialize.h for what falls back
// to the Python reference).
//
// What torch writes for a spec is
//   json.dumps((1, dataclasses.asdict(schema)), cls=EnumEncoder)
// with each node `{"type": name, "context": c, "children_spec": [...]}`,
// where `c` is the node type's to_dumpable_context(context) when it has one
// (a JSON value, after asdict), else the *string* json.dumps(context,
// cls=EnumEncoder). The writer below reproduces json.dumps' defaults:
// separators ", " and ": ", ensure_ascii, allow_nan, int.__repr__ /
// float.__repr__ for numbers (subclasses included), keys coerced as the C
// encoder does (str, float, bool, None, int; anything else is an error).
#include "spec_model/serialize.h"

#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include "base/ft.h"
#include "cpytree/internal/py_format.h"
#include "ground/children.h"
#include "ground/registry.h"
#include "ground/spec_object.h"
#include "spec_model/spec_model.h"

namespace cpytree {

std::atomic<const SerializationState*> g_serial_state{nullptr};

namespace {

// One code point as json's ascii encoder writes it (shared with the header
// library's Dumps).
using internal::AppendJsonCodePoint;

// Appends the ASCII bytes [p, p+n) escaped (no quotes): the inner JSON text
// of a hookless context written again as a JSON string.
void AppendEscapedAscii(std::string* out, const char* p, std::size_t n) {
  std::size_t run = 0;  // bytes copied as they are, flushed in one append
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char b = static_cast<unsigned char>(p[i]);
    if (CPYTREE_LIKELY(b >= ' ' && b <= '~' && b != '\\' && b != '"')) {
      ++run;
      continue;
    }
    out->append(p + i - run, run);
    run = 0;
    AppendJsonCodePoint(out, b);
  }
  out->append(p + n - run, run);
}

// Status of the native value writer: written, or not a value it covers (the
// caller asks Python's json instead; nothing useful is left in `out`).
enum class Wrote { kOk, kUnsupported, kError };

constexpr int kMaxValueDepth = 64;  // deeper (or cyclic) values go to Python's json

bool AppendPyLong(std::string* out, PyObject* o) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow == 0) {
    if (v == -1 && PyErr_Occurred()) return false;
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out->append(buf, r.ptr);
    return true;
  }
  Ref text(PyLong_Type.tp_repr(o));  // int.__repr__, as json writes int subclasses
  if (!text) return false;
  Py_ssize_t n;
  const char* s = PyUnicode_AsUTF8AndSize(text.get(), &n);
  if (s == nullptr) return false;
  out->append(s, n);
  return true;
}

// A dict key as json's C encoder writes it: a JSON string.
Wrote WriteKey(std::string* out, PyObject* key, bool exact) {
  if (PyUnicode_Check(key)) {
    if (exact && !PyUnicode_CheckExact(key)) return Wrote::kUnsupported;
    AppendJsonStr(out, key);
    return Wrote::kOk;
  }
  std::string text;
  if (PyFloat_Check(key)) {
    if (exact && !PyFloat_CheckExact(key)) return Wrote::kUnsupported;
    internal::AppendJsonFloat(&text, PyFloat_AS_DOUBLE(key));
  } else if (key == Py_True) {
    text = "true";
  } else if (key == Py_False) {
    text = "false";
  } else if (key == Py_None) {
    text = "null";
  } else if (PyLong_Check(key)) {
    if (exact && !PyLong_CheckExact(key)) return Wrote::kUnsupported;
    if (!AppendPyLong(&text, key)) return Wrote::kError;
  } else {
    return Wrote::kUnsupported;  // json raises TypeError: let it
  }
  out->push_back('"');
  out->append(text);
  out->push_back('"');
  return Wrote::kOk;
}

// json.dumps(o) appended to `out` (the C encoder's order of checks). With
// `exact`, only exact builtin types: the value then went through
// dataclasses.asdict first, which leaves those alone and copies the rest.
// Runs no Python code (no __eq__, __hash__, default()).
Wrote WriteValue(std::string* out, PyObject* o, bool exact, int depth) {
  if (o == Py_None) {
    out->append("null");
  } else if (o == Py_True) {
    out->append("true");
  } else if (o == Py_False) {
    out->append("false");
  } else if (PyUnicode_Check(o)) {
    if (exact && !PyUnicode_CheckExact(o)) return Wrote::kUnsupported;
    AppendJsonStr(out, o);
  } else if (PyLong_Check(o)) {
    if (exact && !PyLong_CheckExact(o)) return Wrote::kUnsupported;
    if (!AppendPyLong(out, o)) return Wrote::kError;
  } else if (PyFloat_Check(o)) {
    if (exact && !PyFloat_CheckExact(o)) return Wrote::kUnsupported;
    internal::AppendJsonFloat(out, PyFloat_AS_DOUBLE(o));
  } else if (PyList_Check(o) || PyTuple_Check(o)) {
    if (exact && !PyList_CheckExact(o) && !PyTuple_CheckExact(o)) return Wrote::kUnsupported;
    if (depth >= kMaxValueDepth) return Wrote::kUnsupported;
    Ref seq(FrozenSequence(o));
    if (!seq) return Wrote::kError;
    Py_ssize_t n = PyTuple_GET_SIZE(seq.get());
    out->push_back('[');
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (i > 0) out->append(", ");
      Wrote w = WriteValue(out, PyTuple_GET_ITEM(seq.get(), i), exact, depth + 1);
      if (w != Wrote::kOk) return w;
    }
    out->push_back(']');
  } else if (PyDict_Check(o)) {
    if (exact && !PyDict_CheckExact(o)) return Wrote::kUnsupported;
    if (depth >= kMaxValueDepth) return Wrote::kUnsupported;
    out->push_back('{');
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    bool first = true;
    // Nothing below runs Python code, so the dict cannot change meanwhile
    // (without the GIL: under its lock).
    ft::CriticalSection cs(o);
    while (PyDict_Next(o, &pos, &key, &value)) {
      if (!first) out->append(", ");
      first = false;
      Wrote w = WriteKey(out, key, exact);
      if (w != Wrote::kOk) return w;
      out->append(": ");
      w = WriteValue(out, value, exact, depth + 1);
      if (w != Wrote::kOk) return w;
    }
    out->push_back('}');
  } else {
    return Wrote::kUnsupported;  // an Enum (EnumEncoder) or an error: Python's json
  }
  return Wrote::kOk;
}

// Appends the str result of calling `fn(arg)` (JSON text Python wrote).
bool AppendCallResult(std::string* out, PyObject* fn, PyObject* arg, bool escape) {
  Ref text(PyObject_CallOneArg(fn, arg));
  if (!text) return false;
  if (!PyUnicode_Check(text.get()) || !PyUnicode_IS_ASCII(text.get())) {
    PyErr_Format(PyExc_SystemError, "cpytree: expected ASCII JSON text from %R", fn);
    return false;
  }
  Py_ssize_t n;
  const char* s = PyUnicode_AsUTF8AndSize(text.get(), &n);
  if (s == nullptr) return false;
  if (escape) {
    AppendEscapedAscii(out, s, static_cast<std::size_t>(n));
  } else {
    out->append(s, n);
  }
  return true;
}

// Writes `"<json.dumps(context)>"`: a hookless context as a JSON string.
bool WriteContextString(std::string* out, std::string* scratch, PyObject* context) {
  scratch->clear();
  Wrote w = WriteValue(scratch, context, /*exact=*/false, 0);
  if (w == Wrote::kError) return false;
  out->push_back('"');
  if (w == Wrote::kOk) {
    AppendEscapedAscii(out, scratch->data(), scratch->size());
  } else if (!AppendCallResult(out, Serial().context_json, context, /*escape=*/true)) {
    return false;
  }
  out->push_back('"');
  return true;
}

// Writes to_dumpable_context's result `value` as torch does (asdict, json).
bool WriteDumpable(std::string* out, PyObject* value) {
  std::size_t mark = out->size();
  Wrote w = WriteValue(out, value, /*exact=*/true, 0);
  if (w == Wrote::kOk) return true;
  if (w == Wrote::kError) return false;
  out->resize(mark);
  return AppendCallResult(out, Serial().dumpable_json, value, /*escape=*/false);
}

// A registration (_SerializeNodeDef: typ, name, to_hook, from_hook) usable
// natively: a str name other than the placeholder.
struct NodeDef {
  Ref def;         // keeps name and hook alive
  PyObject* name;  // borrowed from def
  PyObject* to_hook;
};

// The registration of `type`, or false with the reference's exception.
bool LookupNodeDef(PyObject* type, NodeDef* out) {
  PyObject* def_ref = nullptr;  // owned: another thread may deregister meanwhile
  if (ft::DictGetItemRef(Serial().supported_serialized_types, type, &def_ref) < 0) return false;
  Ref def_held(def_ref);
  PyObject* def = def_ref;
  if (def != nullptr && PyTuple_Check(def) && PyTuple_GET_SIZE(def) == 4) {
    PyObject* name = PyTuple_GET_ITEM(def, 1);
    if (PyUnicode_CheckExact(name) && PyUnicode_Compare(name, Serial().no_name) != 0) {
      out->def = std::move(def_held);
      out->name = name;
      out->to_hook = PyTuple_GET_ITEM(def, 2);
      return true;
    }
  }
  // Unregistered or nameless: the reference raises torch's NotImplementedError.
  Ref raised(PyObject_CallOneArg(Serial().serialize_node_def, type));
  CPYTREE_CHECK(!raised, false);
  return false;
}

// The node's "context" value. `def` is the registration of the node's type.
bool WriteNodeContext(std::string* out, std::string* scratch, SpecView v, std::int64_t i,
                      const NodeDef& def) {
  const Node& n = v.nodes[i];
  PyObject* const* items = v.items + n.ctx;
  PyObject* hook = def.to_hook;
  switch (n.kind) {
    case NodeKind::kTuple:
    case NodeKind::kList:
      if (hook != Py_None) break;
      out->append("\"null\"");
      return true;
    case NodeKind::kDict:
    case NodeKind::kOrderedDict: {
      if (hook != Py_None) break;
      scratch->clear();
      scratch->push_back('[');
      Wrote w = Wrote::kOk;
      for (std::uint32_t k = 0; k < n.arity && w == Wrote::kOk; ++k) {
        if (k > 0) scratch->append(", ");
        w = WriteValue(scratch, items[k], /*exact=*/false, 1);
      }
      if (w == Wrote::kError) return false;
      if (w == Wrote::kUnsupported) break;  // e.g. Enum keys: the generic path
      scratch->push_back(']');
      out->push_back('"');
      AppendEscapedAscii(out, scratch->data(), scratch->size());
      out->push_back('"');
      return true;
    }
    case NodeKind::kDeque:
      if (hook != Py_None) break;
      return WriteContextString(out, scratch, items[0]);
    case NodeKind::kNamedTuple: {
      if (hook != Serial().namedtuple_serialize) break;
      PyObject* def2 = nullptr;
      if (ft::DictGetItemRef(Serial().supported_serialized_types, items[0], &def2) < 0) {
        return false;
      }
      Ref def2_held(def2);
      if (def2 != nullptr && PyTuple_Check(def2) && PyTuple_GET_SIZE(def2) == 4 &&
          PyUnicode_CheckExact(PyTuple_GET_ITEM(def2, 1)) &&
          PyUnicode_Compare(PyTuple_GET_ITEM(def2, 1), Serial().no_name) != 0) {
        AppendJsonStr(out, PyTuple_GET_ITEM(def2, 1));
        return true;
      }
      break;  // the hook raises torch's NotImplementedError
    }
    case NodeKind::kDefaultDict: {
      if (hook != Serial().defaultdict_serialize) break;
      Ref module(PyObject_GetAttrString(items[0], "__module__"));
      Ref qualname(module ? PyObject_GetAttrString(items[0], "__qualname__") : nullptr);
      if (!qualname || !PyUnicode_CheckExact(module.get()) ||
          !PyUnicode_CheckExact(qualname.get())) {
        PyErr_Clear();
        break;  // the hook raises (or writes) what torch's does
      }
      std::size_t mark = out->size();
      out->append("{\"default_factory_module\": ");
      AppendJsonStr(out, module.get());
      out->append(", \"default_factory_name\": ");
      AppendJsonStr(out, qualname.get());
      out->append(", \"dict_context\": [");
      Wrote w = Wrote::kOk;
      for (std::uint32_t k = 0; k < n.arity && w == Wrote::kOk; ++k) {
        if (k > 0) out->append(", ");
        w = WriteValue(out, items[1 + k], /*exact=*/true, 2);
      }
      if (w == Wrote::kError) return false;
      if (w == Wrote::kOk) {
        out->append("]}");
        return true;
      }
      out->resize(mark);
      break;
    }
    case NodeKind::kCustom:
      if (hook == Py_None) return WriteContextString(out, scratch, items[1]);
      break;
    default:
      break;
  }
  // The generic path: torch's context object, through the registered hook.
  Ref context(NodeContext(v, i));
  if (!context) return false;
  if (hook == Py_None) return WriteContextString(out, scratch, context.get());
  Ref dumpable(PyObject_CallOneArg(hook, context.get()));
  if (!dumpable) return false;
  return WriteDumpable(out, dumpable.get());
}

constexpr char kLeafJson[] = "{\"type\": null, \"context\": null, \"children_spec\": []}";

// The per-call registration of the builtin kinds (looked up on first use).
struct KindDefs {
  NodeDef defs[kNumNodeKinds];
  bool found[kNumNodeKinds] = {};
};

// One pending step of the pre-order walk.
struct Step {
  std::int64_t node;  // node index, or -1: close the children list of a node
  bool first;         // first child of its parent (no ", " before it)
};

bool DumpView(SpecView v, std::string* out) {
  std::string scratch;
  KindDefs kinds;
  std::vector<Step> stack;
  stack.push_back(Step{v.root_index(), true});
  while (!stack.empty()) {
    Step s = stack.back();
    stack.pop_back();
    if (s.node < 0) {
      out->append("]}");
      continue;
    }
    if (!s.first) out->append(", ");
    const Node& n = v.nodes[s.node];
    if (n.kind == NodeKind::kLeaf) {
      out->append(kLeafJson, sizeof kLeafJson - 1);
      continue;
    }
    NodeDef custom_def;
    const NodeDef* def;
    if (n.kind == NodeKind::kCustom) {
      if (!LookupNodeDef(v.items[n.ctx], &custom_def)) return false;
      def = &custom_def;
    } else {
      auto k = static_cast<int>(n.kind);
      if (!kinds.found[k]) {
        Ref type(NodeType(v, s.node));
        if (!type || !LookupNodeDef(type.get(), &kinds.defs[k])) return false;
        kinds.found[k] = true;
      }
      def = &kinds.defs[k];
    }
    out->append("{\"type\": ");
    AppendJsonStr(out, def->name);
    out->append(", \"context\": ");
    if (!WriteNodeContext(out, &scratch, v, s.node, *def)) return false;
    if (n.arity == 0) {
      out->append(", \"children_spec\": []}");
      continue;
    }
    out->append(", \"children_spec\": [");
    stack.push_back(Step{-1, false});
    std::uint32_t k = n.arity;
    internal::ForEachChildReversed(v.nodes, s.node, [&](std::int64_t c) {
      stack.push_back(Step{c, --k == 0});
    });
  }
  return true;
}

}  // namespace

namespace {
// The package's loader of the serialization state (_set_loaders, once at
// `import cpytree`): called with no arguments, it returns the state tuple,
// loading cpytree._serialization. A replaced loader is kept (never freed).
std::atomic<PyObject*> g_serial_loader{nullptr};
}  // namespace

void SetSerializationLoader(PyObject* loader) {
  Py_INCREF(loader);
  g_serial_loader.store(loader, std::memory_order_release);
}

bool SerializationReady() {
  if (CPYTREE_LIKELY(g_serial_state.load(std::memory_order_acquire) != nullptr)) return true;
  // First use: `import cpytree` leaves cpytree._serialization unloaded (import
  // time); the loader it handed over loads it and returns the state, which
  // is set by the same _set_serialization, with the GIL held throughout.
  PyObject* loader = g_serial_loader.load(std::memory_order_acquire);
  if (loader == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "cpytree._C: the serialization loader is not set");
    return false;
  }
  Ref state(PyObject_CallNoArgs(loader));
  if (!state) return false;
  if (g_serial_state.load(std::memory_order_acquire) == nullptr) {  // the loader may have set it
    Ref done(PySetSerialization(nullptr, state.get()));
    if (!done) return false;
  }
  return true;
}

void AppendJsonStr(std::string* out, PyObject* s) {
  out->push_back('"');
  if (PyUnicode_IS_ASCII(s)) {
    AppendEscapedAscii(out, static_cast<const char*>(PyUnicode_DATA(s)),
                       static_cast<std::size_t>(PyUnicode_GET_LENGTH(s)));
  } else {
    int kind = PyUnicode_KIND(s);
    const void* data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < n; ++i) AppendJsonCodePoint(out, PyUnicode_READ(kind, data, i));
  }
  out->push_back('"');
}

PyObject* PySetSerialization(PyObject*, PyObject* state) {
  constexpr Py_ssize_t kFields = sizeof(SerializationState) / sizeof(PyObject*);
  static_assert(sizeof(SerializationState) == kFields * sizeof(PyObject*),
                "SerializationState holds only PyObject* fields");
  if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != kFields) {
    PyErr_Format(PyExc_TypeError, "_set_serialization: expected a tuple of %zd objects", kFields);
    return nullptr;
  }
  // A re-import of the package sets it again: the old state is kept alive
  // (a call under way, in any thread, may be using it), the new one used
  // from now on. Published whole: a reader sees one state or the other.
  auto* next = new SerializationState();
  auto** fields = reinterpret_cast<PyObject**>(next);
  for (Py_ssize_t i = 0; i < kFields; ++i) {
    fields[i] = PyTuple_GET_ITEM(state, i);
    Py_INCREF(fields[i]);
  }
  g_serial_state.store(next, std::memory_order_release);
  Py_RETURN_NONE;
}

PyObject* PyTreespecDumps(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (!SerializationReady()) return nullptr;
  // The native path: an engine spec and protocol None or 1 (positional or
  // keyword). Everything else is the reference's (its checks, its errors).
  PyObject* parsed[2] = {nullptr, Py_None};
  static const char* const kNames[] = {"treespec", "protocol"};
  bool native = nargs >= 1 && nargs <= 2 && IsTreeSpec(args[0]);
  if (native && kwnames != nullptr) {
    native = PyTuple_GET_SIZE(kwnames) == 1 && nargs == 1 &&
             PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "protocol") == 0;
  }
  if (native) {
    for (Py_ssize_t i = 0; i < nargs; ++i) parsed[i] = args[i];
    if (kwnames != nullptr) parsed[1] = args[1];
    (void)kNames;
    PyObject* p = parsed[1];
    native = p == Py_None || (PyLong_CheckExact(p) && PyLong_AsLong(p) == 1);
    PyErr_Clear();  // an overflowing protocol: the reference reports it
  }
  if (!native) {
    return PyObject_Vectorcall(Serial().fallback_dumps, args, static_cast<std::size_t>(nargs),
                               kwnames);
  }
  auto* spec = reinterpret_cast<TreeSpecObject*>(parsed[0]);
  SpecView v = ViewOf(spec);
  Ref hold = Ref::Borrow(parsed[0]);  // hooks run user code
  std::string out;
  out.reserve(static_cast<std::size_t>(v.num_nodes) * 64 + 8);
  out.append("[1, ");
  if (!DumpView(v, &out)) return nullptr;
  out.push_back(']');
  // Every byte written is ASCII (ensure_ascii), Python's fragments included.
  PyObject* result = PyUnicode_New(static_cast<Py_ssize_t>(out.size()), 127);
  if (result == nullptr) return nullptr;
  std::memcpy(PyUnicode_DATA(result), out.data(), out.size());
  return result;
}

}  // namespace cpytree
