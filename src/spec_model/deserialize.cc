// treespec_loads in C++. The common shapes are read without a DOM first
// (deserialize_plain.h); otherwise simdjson parses the text into a DOM, one
// iterative walk decodes the nodes in pre-order (the order torch calls
// from_dumpable_context in) and appends them to a TraversalArena in post-order,
// and the result is interned like any flattened spec.
//
// Any input this path does not take as is (a parse error, a malformed node,
// an unknown type name, a context the builtin kinds do not allow, a number
// simdjson reads differently from Python's json such as -0) makes it hand
// the text to the Python reference, which returns its result or raises its
// exact error. What is accepted must not depend on the simdjson the build
// found: where a simdjson version accepts text json.loads rejects (a leading
// UTF-8 byte-order mark, skipped since simdjson 3.6; NaN/Infinity spellings
// under SIMDJSON_ENABLE_NAN_INF; integers past 64 bits as BIGINT, 4.5+),
// this file declines it first (ParseLikeJsonLoads, ToPython).
//
// Exceptions raised by hooks (from_dumpable_context, the enum object hook)
// propagate at once: the reference would raise them too, at the same node.
#include "spec_model/deserialize.h"

#include <simdjson.h>

#include <cmath>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "base/ft.h"
#include "ground/intern.h"
#include "ground/registry.h"
#include "ground/spec_object.h"
#include "spec_model/deserialize_plain.h"
#include "spec_model/serialize.h"
#include "spec_model/spec_model.h"

namespace cpytree {
namespace {

namespace dom = simdjson::dom;

// How a step ended: done, not taken natively (the reference decides), or a
// Python exception is set.
enum class Outcome { kOk, kFallback, kError };

// The parsers of one loads call: one for the document, one for the JSON
// strings inside it (hookless contexts). Borrowed from a per-thread cache
// when free; a hook that calls treespec_loads again gets fresh ones.
struct Parsers {
  dom::parser doc;
  dom::parser ctx;
  bool busy = false;
};

class ScratchParsers {
 public:
  ScratchParsers() {
    thread_local Parsers cached;
    if (!cached.busy) {
      p_ = &cached;
      cached.busy = true;
    } else {
      owned_ = std::make_unique<Parsers>();
      p_ = owned_.get();
    }
  }
  ~ScratchParsers() {
    if (!owned_) p_->busy = false;
  }
  Parsers* operator->() { return p_; }

 private:
  Parsers* p_;
  std::unique_ptr<Parsers> owned_;
};

// The one version check of this file: simdjson's version is an enum, not a
// macro, so it cannot select code with #if. ToPython's switch names the
// value kinds every version since 3.0 has and sends any other to the
// reference (its `default:`, which keeps -Wswitch quiet on 3.x and 4.x
// alike); a new major version must be reviewed for kinds it adds.
static_assert(simdjson::SIMDJSON_VERSION_MAJOR >= 3 && simdjson::SIMDJSON_VERSION_MAJOR <= 4,
              "review ToPython and ParseLikeJsonLoads against this simdjson's value kinds");

// Parses `text` into `*out` when json.loads would read the same text, else
// returns false (the reference decides, with json.loads's exact error).
// simdjson >= 3.6 skips a leading UTF-8 byte-order mark; json.loads raises
// "Unexpected UTF-8 BOM" for a str that starts with U+FEFF.
bool ParseLikeJsonLoads(dom::parser* parser, std::string_view text, dom::element* out) {
  if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) return false;
  return parser->parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(*out) ==
         simdjson::SUCCESS;
}

// A JSON value as Python's json.loads gives it (with `enum_hook`, objects go
// through the enum object hook as the reference's json.loads calls do).
// Sets *fallback for a value Python would read differently.
PyObject* ToPython(dom::element e, bool enum_hook, bool* fallback) {
  switch (e.type()) {
    case dom::element_type::NULL_VALUE:
      Py_RETURN_NONE;
    case dom::element_type::BOOL:
      if (bool(e.get_bool().value_unsafe())) Py_RETURN_TRUE;
      Py_RETURN_FALSE;
    case dom::element_type::INT64:
      return PyLong_FromLongLong(e.get_int64().value_unsafe());
    case dom::element_type::UINT64:
      return PyLong_FromUnsignedLongLong(e.get_uint64().value_unsafe());
    case dom::element_type::DOUBLE: {
      double d = e.get_double().value_unsafe();
      // "-0" is an int to Python, -0.0 to simdjson. A value that is not
      // finite comes from a spelling simdjson accepts only when built with
      // SIMDJSON_ENABLE_NAN_INF ("nan", "-NaN", ... json.loads takes "NaN",
      // "Infinity" and "-Infinity" alone): the reference reads the text.
      if ((d == 0.0 && std::signbit(d)) || !std::isfinite(d)) {
        *fallback = true;
        return nullptr;
      }
      return PyFloat_FromDouble(d);
    }
    case dom::element_type::STRING: {
      std::string_view s = e.get_string().value_unsafe();
      return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), nullptr);
    }
    case dom::element_type::ARRAY: {
      Ref list(PyList_New(0));
      if (!list) return nullptr;
      dom::array array;  // a named local: a range-for over value_unsafe() dangles
      if (e.get_array().get(array) != simdjson::SUCCESS) return nullptr;
      for (dom::element c : array) {
        Ref item(ToPython(c, enum_hook, fallback));
        if (!item || PyList_Append(list.get(), item.get()) < 0) return nullptr;
      }
      return list.release();
    }
    case dom::element_type::OBJECT: {
      Ref dict(PyDict_New());
      if (!dict) return nullptr;
      bool has_enum_key = false;
      dom::object object;
      if (e.get_object().get(object) != simdjson::SUCCESS) return nullptr;
      for (dom::key_value_pair kv : object) {
        Ref key(
            PyUnicode_DecodeUTF8(kv.key.data(), static_cast<Py_ssize_t>(kv.key.size()), nullptr));
        if (!key) return nullptr;
        Ref value(ToPython(kv.value, enum_hook, fallback));
        if (!value || PyDict_SetItem(dict.get(), key.get(), value.get()) < 0) return nullptr;
        has_enum_key = has_enum_key || kv.key == "__enum__";
      }
      // The hook leaves an object without "__enum__" as it is: skip the call.
      if (enum_hook && has_enum_key) {
        return PyObject_CallOneArg(Serial().enum_object_hook, dict.get());
      }
      return dict.release();
    }
    default:
      // simdjson 4.5's BIGINT (an integer past 64 bits kept as its digits,
      // only with parser.number_as_string(true), never set here; 3.x rejects
      // such numbers) and any kind a later version adds: json.loads makes
      // an int of any length, up to sys.get_int_max_str_digits().
      break;
  }
  *fallback = true;
  return nullptr;
}

Outcome Fail(bool fallback) { return fallback ? Outcome::kFallback : Outcome::kError; }

// The fields of one node object (the last of duplicate keys, as json.loads).
struct NodeJson {
  dom::element type, context;
  dom::array children;
  std::uint32_t arity;
};

bool ReadNode(dom::element e, NodeJson* out) {
  dom::object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return false;
  bool has_type = false, has_context = false, has_children = false;
  dom::element children;
  for (dom::key_value_pair kv : obj) {
    if (kv.key == "type") {
      out->type = kv.value, has_type = true;
    } else if (kv.key == "context") {
      out->context = kv.value, has_context = true;
    } else if (kv.key == "children_spec") {
      children = kv.value, has_children = true;
    }
  }
  if (!has_type || !has_context || !has_children) return false;
  if (children.get_array().get(out->children) != simdjson::SUCCESS) return false;
  std::size_t n = out->children.size();
  if (n >= 0xFFFFFF) {  // simdjson saturates the stored count: count them
    n = 0;
    for (dom::element c : out->children) (void)c, ++n;
  }
  if (n > UINT32_MAX) return false;
  out->arity = static_cast<std::uint32_t>(n);
  return true;
}

// A type name resolved through the registry, once per call.
struct TypeEntry {
  std::string_view name;  // points into the parsed document
  Ref type;
  NodeKind kind;
  Ref from_hook;  // None or the registered from_dumpable_context
};

// A namedtuple serialized name resolved to its class, once per call.
struct NamedTupleEntry {
  std::string_view name;
  Ref cls;
  std::size_t num_fields;
};

class Loader {
 public:
  Loader(Parsers* parsers, TraversalArena* b) : parsers_(parsers), b_(b) {}

  // Decodes the node `e` into the arena: its items now and, through the
  // frame stack, its children before it is closed.
  Outcome Enter(dom::element e) {
    NodeJson node;
    if (!ReadNode(e, &node)) return Outcome::kFallback;
    if (node.type.is_null() && node.context.is_null() && node.arity == 0) {
      b_->nodes.push_back(internal::MakeNode(NodeKind::kLeaf, 0, ItemCount(), 1, 1));
      AddToParent(1, 1);
      return Outcome::kOk;
    }
    std::string_view name;
    if (node.type.get_string().get(name) != simdjson::SUCCESS) return Outcome::kFallback;
    const TypeEntry* entry;
    Outcome o = Resolve(name, &entry);
    if (o != Outcome::kOk) return o;
    std::uint32_t ctx = ItemCount();
    o = AddItems(*entry, node);
    if (o != Outcome::kOk) return o;
    if (node.arity == 0) {
      b_->nodes.push_back(internal::MakeNode(entry->kind, 0, ctx, 0, 1));
      AddToParent(0, 1);
      return Outcome::kOk;
    }
    frames_.push_back(
        Frame{node.children.begin(), node.children.end(), entry->kind, node.arity, ctx, 0, 1});
    return Outcome::kOk;
  }

  // Runs the walk from the root node; the arena then holds one tree.
  Outcome Run(dom::element root) {
    Outcome o = Enter(root);
    while (o == Outcome::kOk && !frames_.empty()) {
      Frame& f = frames_.back();
      if (f.next != f.end) {
        dom::element child = *f.next;
        ++f.next;
        o = Enter(child);  // may grow frames_: f is not used after
        continue;
      }
      Node n = internal::MakeNode(f.kind, f.arity, f.ctx, f.leaves, f.count);
      frames_.pop_back();
      b_->nodes.push_back(n);
      AddToParent(n.num_leaves, n.num_nodes);
    }
    return o;
  }

 private:
  struct Frame {
    dom::array::iterator next, end;
    NodeKind kind;
    std::uint32_t arity;
    std::uint32_t ctx;
    std::int64_t leaves;
    std::int64_t count;
  };

  std::uint32_t ItemCount() const { return static_cast<std::uint32_t>(b_->items.size()); }

  void AddToParent(std::int64_t leaves, std::int64_t count) {
    if (frames_.empty()) return;
    frames_.back().leaves += leaves;
    frames_.back().count += count;
  }

  // The registration of a serialized type name (kFallback when there is none).
  Outcome Resolve(std::string_view name, const TypeEntry** out) {
    for (const TypeEntry& t : types_) {
      if (t.name == name) {
        *out = &t;
        return Outcome::kOk;
      }
    }
    if (name == "NO_SERIALIZED_TYPE_NAME_FOUND") return Outcome::kFallback;
    Ref key(PyUnicode_DecodeUTF8(name.data(), static_cast<Py_ssize_t>(name.size()), nullptr));
    if (!key) return Outcome::kError;
    // Owned at once: another thread may register or deregister meanwhile.
    PyObject* type = nullptr;
    int got = ft::DictGetItemRef(Serial().serialized_type_to_python_type, key.get(), &type);
    if (got <= 0) return Fail(got == 0);
    Ref hold(type);
    PyObject* def_ref = nullptr;
    got = ft::DictGetItemRef(Serial().supported_serialized_types, type, &def_ref);
    if (got <= 0) return Fail(got == 0);
    Ref def_held(def_ref);
    PyObject* def = def_ref;
    if (!PyTuple_Check(def) || PyTuple_GET_SIZE(def) != 4) return Outcome::kFallback;
    types_.push_back(
        TypeEntry{name, std::move(hold), KindOfType(type), Ref::Borrow(PyTuple_GET_ITEM(def, 3))});
    *out = &types_.back();
    return Outcome::kOk;
  }

  // Parses a hookless context string; kFallback on invalid JSON.
  Outcome ParseContext(std::string_view text, dom::element* out) {
    return ParseLikeJsonLoads(&parsers_->ctx, text, out) ? Outcome::kOk : Outcome::kFallback;
  }

  Outcome AddOwned(PyObject* owned, bool fallback) {
    if (owned == nullptr) return Fail(fallback);
    b_->AddItem(owned);
    return Outcome::kOk;
  }

  // Appends the node's context items (checked as the reference checks them).
  Outcome AddItems(const TypeEntry& t, const NodeJson& node) {
    PyObject* hook = t.from_hook.get();
    if (hook == Py_None) {
      std::string_view text;
      if (node.context.get_string().get(text) != simdjson::SUCCESS) return Outcome::kFallback;
      switch (t.kind) {
        case NodeKind::kTuple:
        case NodeKind::kList:
          return text == "null" ? Outcome::kOk : Outcome::kFallback;
        case NodeKind::kDict:
        case NodeKind::kOrderedDict:
          return AddKeys(text, node.arity);
        case NodeKind::kDeque:
          return AddMaxLen(text);
        case NodeKind::kCustom: {
          dom::element value;
          Outcome o = ParseContext(text, &value);
          if (o != Outcome::kOk) return o;
          bool fallback = false;
          Ref context(ToPython(value, /*enum_hook=*/true, &fallback));
          if (!context) return Fail(fallback);
          b_->AddItem(Ref::Borrow(t.type.get()).release());
          b_->AddItem(context.release());
          return Outcome::kOk;
        }
        default:
          return Outcome::kFallback;  // a builtin kind re-registered without its hook
      }
    }
    if (t.kind == NodeKind::kNamedTuple && hook == Serial().namedtuple_deserialize) {
      return AddNamedTuple(node);
    }
    if (t.kind != NodeKind::kCustom && t.kind != NodeKind::kDefaultDict) {
      return Outcome::kFallback;
    }
    bool fallback = false;
    Ref dumpable(ToPython(node.context, /*enum_hook=*/false, &fallback));
    if (!dumpable) return Fail(fallback);
    Ref context(PyObject_CallOneArg(hook, dumpable.get()));
    if (!context) return Outcome::kError;
    if (t.kind == NodeKind::kCustom) {
      b_->AddItem(Ref::Borrow(t.type.get()).release());
      b_->AddItem(context.release());
      return Outcome::kOk;
    }
    return AddDefaultDict(t, context.get(), node.arity);
  }

  // dict / OrderedDict: the context string is the JSON list of the keys.
  Outcome AddKeys(std::string_view text, std::uint32_t arity) {
    dom::element value;
    Outcome o = ParseContext(text, &value);
    if (o != Outcome::kOk) return o;
    dom::array keys;
    if (value.get_array().get(keys) != simdjson::SUCCESS || keys.size() != arity) {
      return Outcome::kFallback;
    }
    for (dom::element k : keys) {
      bool fallback = false;
      Ref key(ToPython(k, /*enum_hook=*/true, &fallback));
      if (!key) return Fail(fallback);
      if (PyObject_Hash(key.get()) == -1) {  // a list or an object: not a key
        PyErr_Clear();
        return Outcome::kFallback;
      }
      b_->AddItem(key.release());
    }
    return Outcome::kOk;
  }

  // deque: the context string is its maxlen, null or an int >= 0.
  Outcome AddMaxLen(std::string_view text) {
    if (text == "null") return AddOwned(Ref::Borrow(Py_None).release(), false);
    dom::element value;
    Outcome o = ParseContext(text, &value);
    if (o != Outcome::kOk) return o;
    std::int64_t maxlen;
    if (value.type() != dom::element_type::INT64 ||
        value.get_int64().get(maxlen) != simdjson::SUCCESS || maxlen < 0) {
      return Outcome::kFallback;
    }
    return AddOwned(PyLong_FromLongLong(maxlen), false);
  }

  // namedtuple: the context is the serialized name of a registered
  // namedtuple class with one field per child.
  Outcome AddNamedTuple(const NodeJson& node) {
    std::string_view name;
    if (node.context.get_string().get(name) != simdjson::SUCCESS) return Outcome::kFallback;
    const NamedTupleEntry* entry = nullptr;
    for (const NamedTupleEntry& n : namedtuples_) {
      if (n.name == name) entry = &n;
    }
    if (entry == nullptr) {
      if (name == "NO_SERIALIZED_TYPE_NAME_FOUND") return Outcome::kFallback;
      Ref key(PyUnicode_DecodeUTF8(name.data(), static_cast<Py_ssize_t>(name.size()), nullptr));
      if (!key) return Outcome::kError;
      PyObject* cls = nullptr;
      int got = ft::DictGetItemRef(Serial().serialized_type_to_python_type, key.get(), &cls);
      if (got <= 0) return Fail(got == 0);
      Ref hold(cls);
      int ok = PyType_Check(cls) ? IsNamedTupleClass(reinterpret_cast<PyTypeObject*>(cls)) : 0;
      if (ok <= 0) return Fail(ok == 0);
      Ref fields(PyObject_GetAttrString(cls, "_fields"));
      if (!fields) return Outcome::kError;
      if (!PyTuple_Check(fields.get())) return Outcome::kFallback;
      namedtuples_.push_back(NamedTupleEntry{
          name, std::move(hold), static_cast<std::size_t>(PyTuple_GET_SIZE(fields.get()))});
      entry = &namedtuples_.back();
    }
    if (entry->num_fields != node.arity) return Outcome::kFallback;
    return AddOwned(Ref::Borrow(entry->cls.get()).release(), false);
  }

  // defaultdict: [default_factory, keys] from its hook, keys one per child.
  Outcome AddDefaultDict(const TypeEntry& t, PyObject* context, std::uint32_t arity) {
    {
      ft::CriticalSection cs(context);  // a hook's list: another thread may hold it
      if (!PyList_CheckExact(context) || PyList_GET_SIZE(context) != 2) return Outcome::kFallback;
      PyObject* keys = PyList_GET_ITEM(context, 1);
      if (!PyList_CheckExact(keys) || PyList_GET_SIZE(keys) != arity) return Outcome::kFallback;
    }
    // Any failure (an unhashable key, a factory that is no callable): the
    // reference raises its own error for it, in its order.
    if (AddRootItems(b_, t.kind, t.type.get(), context, arity)) return Outcome::kOk;
    PyErr_Clear();
    return Outcome::kFallback;
  }

  Parsers* parsers_;
  TraversalArena* b_;
  // Few distinct names per spec: linear scans beat hashing here. A pointer
  // to an entry is used only until the next entry of its vector is added.
  absl::InlinedVector<Frame, 16> frames_;
  absl::InlinedVector<TypeEntry, 8> types_;
  absl::InlinedVector<NamedTupleEntry, 4> namedtuples_;
};

// The native loads: kFallback when the reference must decide.
Outcome LoadsNative(PyObject* text, PyObject** result) {
  Py_ssize_t size;
  const char* utf8 = PyUnicode_AsUTF8AndSize(text, &size);
  if (utf8 == nullptr) {  // e.g. a lone surrogate: json.loads decides
    PyErr_Clear();
    return Outcome::kFallback;
  }
  std::string_view whole(utf8, static_cast<std::size_t>(size));
  switch (LoadsPlain(whole, result)) {  // the common shapes, without a DOM
    case PlainLoad::kOk:
      return Outcome::kOk;
    case PlainLoad::kError:
      return Outcome::kError;
    case PlainLoad::kDeclined:
      break;
  }
  ScratchParsers parsers;
  dom::element root;
  if (!ParseLikeJsonLoads(&parsers->doc, whole, &root)) {
    return Outcome::kFallback;
  }
  dom::array top;
  if (root.get_array().get(top) != simdjson::SUCCESS || top.size() != 2) {
    return Outcome::kFallback;
  }
  auto it = top.begin();
  dom::element protocol = *it;
  ++it;
  std::int64_t p;
  if (protocol.type() != dom::element_type::INT64 ||
      protocol.get_int64().get(p) != simdjson::SUCCESS || p != 1) {
    return Outcome::kFallback;  // 1.0, true, or an error the reference words
  }
  ScratchArena b;  // a per-thread arena: no allocation when the spec is known
  Loader loader(parsers.operator->(), b.get());
  Outcome o = loader.Run(*it);
  if (o != Outcome::kOk) return o;
  if (b->nodes.size() == 1 && b->nodes[0].kind == NodeKind::kLeaf) {
    Py_INCREF(LeafSpec());
    *result = LeafSpec();
    return Outcome::kOk;
  }
  *result = InternArena(b.get());
  return *result != nullptr ? Outcome::kOk : Outcome::kError;
}

}  // namespace

PyObject* PyTreespecLoads(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (!SerializationReady()) return nullptr;
  if (nargs == 1 && kwnames == nullptr && PyUnicode_Check(args[0])) {
    PyObject* result = nullptr;
    Outcome o = LoadsNative(args[0], &result);
    if (o == Outcome::kOk) return result;
    if (o == Outcome::kError) return nullptr;
  }
  // Not a str (TypeError, or bytes json.loads reads), or not taken natively.
  return PyObject_Vectorcall(Serial().fallback_loads, args, static_cast<std::size_t>(nargs),
                             kwnames);
}

}  // namespace cpytree
