// Protocol-1 JSON for specs: what Python's `torch.utils._pytree.treespec_dumps`
// writes and `treespec_loads` reads.
//
// `Dumps(spec)` is byte-identical to `treespec_dumps` of the same spec for the
// builtin node types (tuple, list, dict, namedtuple, OrderedDict, defaultdict,
// deque) and for custom nodes loaded from Python's output: their serialized
// type name and context are kept as data and written back unchanged.
// `Loads(text)` accepts anything `treespec_loads` accepts for those types and
// throws `cpytree::ParseError` (with a byte offset or a JSON path) on
// anything malformed, never undefined behaviour.
//
// The format, as torch writes it with `json.dumps` defaults (", " and ": "
// separators, ASCII only, insertion order):
//
//   [1, {"type": "builtins.dict", "context": "[\"a\", \"b\"]", "children_spec": [
//        {"type": null, "context": null, "children_spec": []}, ...]}]
//
// Each node's "context" is itself JSON text in a JSON string (`json.dumps`
// applied twice), except for namedtuple (the bare serialized class name),
// defaultdict (an object holding the factory and the key list) and custom
// nodes registered with `to_dumpable_context` (whatever that returned).
//
// Example:
//   cpytree::TreeSpec spec = cpytree::Loads(text_from_python);
//   assert(cpytree::Dumps(spec) == text_from_python);
//
// Limits: JSON nesting is bounded (internal::kDefaultMaxJsonDepth); NaN and
// Infinity (which Python writes for such float keys) are rejected on input;
// ints beyond about 1e308 are rejected (nlohmann reads them as doubles).
//
// Speed: Loads parses with simdjson and reads its DOM straight into the spec;
// anything that path declines or rejects is read again by the nlohmann
// reference path, which gives the error (internal/json_reader.h says why).
#ifndef CPYTREE_JSON_H_
#define CPYTREE_JSON_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/internal/json_reader.h"
#include "cpytree/internal/node.h"
#include "cpytree/internal/py_format.h"
#include "cpytree/kind.h"
#include "cpytree/spec.h"
#include "cpytree/value.h"

namespace cpytree {

// The protocol `Dumps` writes by default (torch's DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL).
inline constexpr int kDefaultProtocol = 1;

// Python's `json.dumps(value)` text for `value` (default separators, ASCII only).
std::string DumpsValue(const Value& value);
// Python's `json.loads(text)`; throws ParseError on malformed input.
Value LoadsValue(std::string_view text);
// `treespec_dumps(spec, protocol)`; throws Error for a protocol other than 1.
std::string Dumps(const TreeSpec& spec, int protocol = kDefaultProtocol);
// `treespec_loads(text)`; throws ParseError on malformed or invalid input.
TreeSpec Loads(std::string_view text);

namespace internal {

// Appends `json.dumps(v)` to `out`.
inline void AppendPyJson(const Value& v, std::string* out) {
  switch (v.type()) {
    case Value::Type::kNone:
      out->append("null");
      return;
    case Value::Type::kBool:
      out->append(v.as_bool() ? "true" : "false");
      return;
    case Value::Type::kInt:
    case Value::Type::kBigInt:
      out->append(v.int_text());
      return;
    case Value::Type::kFloat:
      AppendJsonFloat(out, v.as_float());
      return;
    case Value::Type::kString:
      AppendJsonString(out, v.as_string());
      return;
    case Value::Type::kList: {
      out->push_back('[');
      bool first = true;
      for (const Value& item : v.as_list()) {
        if (!first) out->append(", ");
        first = false;
        AppendPyJson(item, out);
      }
      out->push_back(']');
      return;
    }
    case Value::Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const Value::Member& m : v.as_object()) {
        if (!first) out->append(", ");
        first = false;
        AppendJsonString(out, m.first);
        out->append(": ");
        AppendPyJson(m.second, out);
      }
      out->push_back('}');
      return;
    }
  }
}

// Appends `json.dumps(json.dumps(...))` of the keys `keys[0..n)` as a list.
inline void AppendEncodedKeyList(const Value* keys, std::size_t n, std::string* out) {
  std::string inner = "[";
  for (std::size_t k = 0; k < n; ++k) {
    if (k) inner.append(", ");
    AppendPyJson(keys[k], &inner);
  }
  inner.push_back(']');
  AppendJsonString(out, inner);
}

// Writes the subtree rooted at `i` of a spec's arrays as a protocol-1 schema.
inline void AppendSchema(const Node* nodes, const Value* items, std::int64_t i, std::string* out) {
  const Node& n = nodes[i];
  if (n.kind == NodeKind::kLeaf) {
    out->append(R"({"type": null, "context": null, "children_spec": []})");
    return;
  }
  const Value* ctx = items + n.ctx;
  out->append(R"({"type": )");
  if (n.kind != NodeKind::kCustom) {
    out->push_back('"');
    out->append(SerializedTypeName(n.kind));
    out->append(R"(", "context": )");
  }
  switch (n.kind) {
    case NodeKind::kTuple:
    case NodeKind::kList:
      out->append(R"("null")");
      break;
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
      AppendEncodedKeyList(ctx, n.arity, out);
      break;
    case NodeKind::kDefaultDict: {
      const Value::List& f = ctx[0].as_list();
      out->append(R"({"default_factory_module": )");
      AppendJsonString(out, f[0].as_string());
      out->append(R"(, "default_factory_name": )");
      AppendJsonString(out, f[1].as_string());
      out->append(R"(, "dict_context": [)");
      for (std::uint32_t k = 0; k < n.arity; ++k) {
        if (k) out->append(", ");
        AppendPyJson(ctx[1 + k], out);
      }
      out->append("]}");
      break;
    }
    case NodeKind::kNamedTuple:
      AppendJsonString(out, ctx[0].as_string());
      break;
    case NodeKind::kDeque: {
      std::string inner;
      AppendPyJson(ctx[0], &inner);
      AppendJsonString(out, inner);
      break;
    }
    case NodeKind::kCustom:
      AppendJsonString(out, ctx[0].as_string());
      out->append(R"(, "context": )");
      AppendPyJson(ctx[1], out);
      break;
    case NodeKind::kLeaf:
      break;
  }
  out->append(R"(, "children_spec": [)");
  std::vector<std::int64_t> kids;
  ChildIndices(nodes, i, &kids);
  for (std::size_t k = 0; k < kids.size(); ++k) {
    if (k) out->append(", ");
    AppendSchema(nodes, items, kids[k], out);
  }
  out->append("]}");
}

// One step of a JSON path, kept as a linked list and formatted only on error.
struct SchemaPath {
  const SchemaPath* parent;  // nullptr at the root schema ($[1])
  std::size_t child;         // index in the parent's children_spec

  std::string Format(const char* suffix = "") const {
    std::vector<std::size_t> steps;
    for (const SchemaPath* p = this; p->parent != nullptr; p = p->parent) steps.push_back(p->child);
    std::string out = "$[1]";
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      out += ".children_spec[" + std::to_string(*it) + "]";
    }
    return out + suffix;
  }
};

// True when `key` is `name` (a literal; a fixed-size compare the compiler inlines).
template <std::size_t N>
bool KeyIs(std::string_view key, const char (&name)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), name, N - 1) == 0;
}

// Reads protocol-1 schemas into SpecData (nodes post-order, items pre-order):
// the one reader of both of Loads' paths. `Doc` is how the document is read:
//  - ValueDoc, the reference: the document as Values (nlohmann's parser).
//    Accepts everything torch's treespec_loads accepts for the supported
//    types; on anything else Fail throws ParseError with the JSON path.
//  - SimdjsonDoc, the fast path: simdjson's DOM read in place (only context
//    items become Values). Fail declines (Read returns false), as does every
//    shape it leaves to the reference (extra or repeated members, values
//    beyond what FastValue reads, deep nesting); Loads then reads the text
//    again with ValueDoc, which accepts it or throws. So what the fast path
//    accepts, it reads as the reference would.
// A Doc gives: Element, List, Decoded; IsNull, String, Int, AsList, Size,
// ForEach, Object (checks an object, with `exact` members or any number),
// Members, Decode (a context stored as JSON text), Keys, ToValue, Repr
// (messages only) and Fail(message-maker, path, suffix).
template <class Doc>
class SchemaReader {
 public:
  using Element = typename Doc::Element;

  SchemaReader(SpecData* out, Doc* doc) : out_(out), doc_(doc) {}

  // Appends the subtree described by `schema` and sets *node to its root;
  // false when the Doc declined.
  bool Read(Element schema, const SchemaPath& path, Node* node) {
    if (!doc_->Object(schema, 3, false)) {
      return Fail(path, "",
                  [&] { return "a spec node must be a JSON object, got " + doc_->Repr(schema); });
    }
    Element fields[3];
    std::size_t missing;
    if (!doc_->template Members<SchemaMember>(schema, kFields, fields, &missing)) {
      return Fail(path, "", [&] {
        return "a spec node needs the key \"" + std::string(kFields[missing]) + "\"";
      });
    }
    Element type = fields[0], context = fields[1], children = fields[2];
    typename Doc::List kids;
    if (!doc_->AsList(children, &kids)) {
      return Fail(path, ".children_spec",
                  [] { return std::string("\"children_spec\" must be a list"); });
    }
    std::size_t arity = doc_->Size(kids);
    std::uint32_t ctx = static_cast<std::uint32_t>(out_->items.size());
    if (doc_->IsNull(type)) {
      if (!doc_->IsNull(context) || arity != 0) {
        return Fail(path, "", [] {
          return std::string("a leaf (\"type\": null) must have a null context and no children");
        });
      }
      out_->nodes.push_back(MakeNode(NodeKind::kLeaf, 0, ctx, 1, 1));
      *node = out_->nodes.back();
      return true;
    }
    std::string_view type_name;
    if (!doc_->String(type, &type_name)) {
      return Fail(path, ".type", [] { return std::string("\"type\" must be a string or null"); });
    }
    if (arity > std::numeric_limits<std::uint32_t>::max()) {
      return Fail(path, "", [] { return std::string("too many children"); });
    }
    NodeKind kind = KindOfSerializedTypeName(type_name);
    if (!ReadContext(kind, type_name, context, arity, path)) return false;
    if (out_->items.size() > std::numeric_limits<std::uint32_t>::max()) {
      return Fail(path, "", [] { return std::string("too many context items"); });
    }
    std::int64_t leaves = 0, count = 1;
    bool ok = doc_->ForEach(kids, [&](std::size_t k, Element kid) {
      Node c;
      if (!Read(kid, SchemaPath{&path, k}, &c)) return false;
      leaves += c.num_leaves;
      count += c.num_nodes;
      return true;
    });
    if (!ok) return false;
    out_->nodes.push_back(MakeNode(kind, static_cast<std::uint32_t>(arity), ctx, leaves, count));
    *node = out_->nodes.back();
    return true;
  }

 private:
  // The members of a schema node and of a defaultdict context: their names,
  // and the index of a name (-1 for another), which the fast path matches
  // with inlined compares.
  static constexpr std::string_view kFields[] = {"type", "context", "children_spec"};
  static int SchemaMember(std::string_view key) {
    return KeyIs(key, "type")            ? 0
           : KeyIs(key, "context")       ? 1
           : KeyIs(key, "children_spec") ? 2
                                         : -1;
  }
  static constexpr std::string_view kFactoryFields[] = {"default_factory_module",
                                                        "default_factory_name", "dict_context"};
  static int FactoryMember(std::string_view key) {
    return KeyIs(key, "default_factory_module") ? 0
           : KeyIs(key, "default_factory_name") ? 1
           : KeyIs(key, "dict_context")         ? 2
                                                : -1;
  }

  template <class Message>
  bool Fail(const SchemaPath& path, const char* suffix, Message message) {
    return doc_->Fail(message, path, suffix);
  }
  // Appends the `arity` keys of a JSON list (dict kinds); `keys` is an
  // Element or a Decoded context.
  template <class E>
  bool AppendKeys(const E& keys, std::size_t arity, const SchemaPath& path, const char* suffix) {
    typename Doc::List list;
    if (!doc_->AsList(keys, &list)) {
      return Fail(path, suffix,
                  [&] { return "the keys must be a JSON list, got " + doc_->Repr(keys); });
    }
    std::size_t n = doc_->Size(list);
    if (n != arity) {
      return Fail(path, suffix, [&] {
        return "the node has " + std::to_string(n) + " keys but " + std::to_string(arity) +
               " children";
      });
    }
    return doc_->Keys(list, &out_->items);
  }
  // A context stored as JSON text inside a JSON string, decoded into *out.
  bool Decode(Element context, const SchemaPath& path, typename Doc::Decoded* out) {
    std::string_view text;
    if (!doc_->String(context, &text)) {
      return Fail(path, ".context",
                  [] { return std::string("\"context\" must be a string of JSON text"); });
    }
    return doc_->Decode(text, path, out);
  }
  bool ReadContext(NodeKind kind, std::string_view type, Element context, std::size_t arity,
                   const SchemaPath& path) {
    std::vector<Value>& items = out_->items;
    typename Doc::Decoded decoded;
    switch (kind) {
      case NodeKind::kTuple:
      case NodeKind::kList:
        if (!Decode(context, path, &decoded)) return false;
        if (!doc_->IsNull(decoded)) {
          return Fail(path, ".context",
                      [&] { return "the context of " + std::string(type) + " must be \"null\""; });
        }
        return true;
      case NodeKind::kDict:
      case NodeKind::kOrderedDict:
        return Decode(context, path, &decoded) && AppendKeys(decoded, arity, path, ".context");
      case NodeKind::kDefaultDict: {
        if (!doc_->Object(context, 3, true)) {
          return Fail(path, ".context", [] {
            return std::string(
                "the context of collections.defaultdict must be an object with exactly the keys "
                "default_factory_module, default_factory_name, dict_context");
          });
        }
        Element fields[3];
        std::size_t missing;
        if (!doc_->template Members<FactoryMember>(context, kFactoryFields, fields, &missing)) {
          return Fail(path, ".context", [] {
            return std::string(
                "the context of collections.defaultdict must have the keys "
                "default_factory_module, default_factory_name, dict_context");
          });
        }
        Element module = fields[0], name = fields[1], keys = fields[2];
        std::string_view module_text, name_text;
        if (!doc_->String(module, &module_text) || !doc_->String(name, &name_text)) {
          return Fail(path, ".context", [] {
            return std::string("default_factory_module and default_factory_name must be strings");
          });
        }
        std::size_t first = items.size();
        items.emplace_back();  // the factory, in front of the keys
        if (!AppendKeys(keys, arity, path, ".context.dict_context")) return false;
        items[first] = Value::MakeList({Value(module_text), Value(name_text)});
        return true;
      }
      case NodeKind::kNamedTuple: {
        std::string_view name;
        if (!doc_->String(context, &name) || name.empty()) {
          return Fail(path, ".context", [] {
            return std::string(
                "the context of collections.namedtuple must be the class's serialized name");
          });
        }
        items.emplace_back(name);
        return true;
      }
      case NodeKind::kDeque: {
        if (!Decode(context, path, &decoded)) return false;
        if (doc_->IsNull(decoded)) {
          items.emplace_back();
          return true;
        }
        std::int64_t maxlen;
        if (!doc_->Int(decoded, &maxlen) || maxlen < 0) {
          return Fail(path, ".context", [] {
            return std::string("the maxlen of collections.deque must be null or an int >= 0");
          });
        }
        items.emplace_back(maxlen);
        return true;
      }
      case NodeKind::kCustom:
        if (type.empty()) {
          return Fail(path, ".type", [] { return std::string("\"type\" must not be empty"); });
        }
        items.emplace_back(type);
        items.emplace_back();
        return doc_->ToValue(context, &items.back());
      case NodeKind::kLeaf:
        break;
    }
    return false;
  }

  SpecData* out_;
  Doc* doc_;
};

// The reference document: Values from nlohmann's parser. Accepts any shape
// torch does; Fail throws.
class ValueDoc {
 public:
  using Element = const Value*;
  using List = const Value::List*;
  using Decoded = Element;

  template <class Message>
  [[noreturn]] bool Fail(Message message, const SchemaPath& path, const char* suffix) {
    throw ParseError(message(), ParseError::kNoPosition, path.Format(suffix));
  }
  static bool IsNull(Element e) { return e->is_none(); }
  static bool String(Element e, std::string_view* out) {
    if (!e->is_string()) return false;
    *out = e->as_string();
    return true;
  }
  static bool Int(Element e, std::int64_t* out) {
    if (e->type() != Value::Type::kInt) return false;
    *out = e->as_int();
    return true;
  }
  static bool AsList(Element e, List* out) {
    if (!e->is_list()) return false;
    *out = &e->as_list();
    return true;
  }
  static std::size_t Size(List list) { return list->size(); }
  template <class F>
  static bool ForEach(List list, F&& f) {
    for (std::size_t k = 0; k < list->size(); ++k) {
      if (!f(k, &(*list)[k])) return false;
    }
    return true;
  }
  // Any number of members unless `exact`: the members Read needs are looked
  // up, others ignored (as torch does).
  static bool Object(Element e, std::size_t n, bool exact) {
    return e->is_object() && (!exact || e->as_object().size() == n);
  }
  // Looks up names[k] into out[k]; false with *missing the first absent one.
  template <int (*Index)(std::string_view), std::size_t N>
  static bool Members(Element e, const std::string_view (&names)[N], Element (&out)[N],
                      std::size_t* missing) {
    for (std::size_t k = 0; k < N; ++k) {
      out[k] = e->Find(names[k]);
      if (out[k] == nullptr) {
        *missing = k;
        return false;
      }
    }
    return true;
  }
  bool Decode(std::string_view text, const SchemaPath& path, Decoded* out) {
    decoded_.emplace_back();
    if (text != "null") {  // tuple, list and most deques
      try {
        decoded_.back() = ReadJson(text, kDefaultMaxJsonDepth);
      } catch (const ParseError& e) {
        Fail([&] { return std::string("\"context\" is not valid JSON text: ") + e.what(); }, path,
             ".context");
      }
    }
    *out = &decoded_.back();
    return true;
  }
  static bool Keys(List list, std::vector<Value>* items) {
    items->insert(items->end(), list->begin(), list->end());
    return true;
  }
  static bool ToValue(Element e, Value* out) {
    *out = *e;
    return true;
  }
  static std::string Repr(Element e) { return e->Repr(); }

 private:
  std::deque<Value> decoded_;  // decoded contexts, alive while the reader runs
};

// The fast document: simdjson's DOM, read in place. Declines whatever the
// reference should decide (Fail returns false).
class SimdjsonDoc {
 public:
  using Element = simdjson::dom::element;
  using List = simdjson::dom::array;
  // A decoded context: the text "null" (tuple, list, most deques) is known
  // without a parse, anything else is parsed.
  struct Decoded {
    bool null_text = false;
    Element parsed;
  };

  // `inner` parses the contexts stored as JSON text; it must not be the
  // parser that holds the document being read.
  explicit SimdjsonDoc(simdjson::dom::parser* inner) : inner_(inner) {}

  template <class Message>
  static bool Fail(Message, const SchemaPath&, const char*) {
    return false;
  }
  static bool IsNull(Element e) { return e.is_null(); }
  static bool String(Element e, std::string_view* out) {
    return e.get_string().get(*out) == simdjson::SUCCESS;
  }
  static bool Int(Element e, std::int64_t* out) {
    return e.is_int64() && e.get_int64().get(*out) == simdjson::SUCCESS;
  }
  static bool AsList(Element e, List* out) { return e.get_array().get(*out) == simdjson::SUCCESS; }
  static std::size_t Size(List list) { return list.size(); }
  template <class F>
  static bool ForEach(List list, F&& f) {
    std::size_t k = 0;
    for (Element e : list) {
      if (!f(k++, e)) return false;
    }
    return true;
  }
  // Exactly `n` members always: with n distinct names looked up, no name can
  // then be repeated (where Python keeps the last value, simdjson finds the
  // first).
  static bool Object(Element e, std::size_t n, bool) {
    simdjson::dom::object o;
    return e.get_object().get(o) == simdjson::SUCCESS && o.size() == n;
  }
  // One pass over the members (Object checked their number first), each
  // name matched by Index (names are for the reference's messages).
  template <int (*Index)(std::string_view), std::size_t N>
  static bool Members(Element e, const std::string_view (&)[N], Element (&out)[N],
                      std::size_t* missing) {
    unsigned seen = 0;
    simdjson::dom::object members = e.get_object().value_unsafe();
    for (simdjson::dom::key_value_pair kv : members) {
      int k = Index(kv.key);
      if (k >= 0) {
        out[k] = kv.value;
        seen |= 1u << k;
      }
    }
    *missing = 0;
    return seen == (1u << N) - 1;
  }
  bool Decode(std::string_view text, const SchemaPath&, Decoded* out) {
    if (text == "null") {
      out->null_text = true;
      return true;
    }
    return !StartsWithUtf8Bom(text) &&
           inner_->parse(text.data(), text.size()).get(out->parsed) == simdjson::SUCCESS;
  }
  static bool IsNull(const Decoded& d) { return d.null_text || d.parsed.is_null(); }
  static bool Int(const Decoded& d, std::int64_t* out) {
    return !d.null_text && Int(d.parsed, out);
  }
  static bool AsList(const Decoded& d, List* out) { return !d.null_text && AsList(d.parsed, out); }
  static std::string Repr(const Decoded&) { return {}; }
  static bool Keys(List list, std::vector<Value>* items) {
    for (Element k : list) {
      if (k.is_string()) {  // the common key, built in place
        items->emplace_back(k.get_string().value_unsafe());
        continue;
      }
      items->emplace_back();
      if (!FastValue(k, &items->back())) return false;
    }
    return true;
  }
  static bool ToValue(Element e, Value* out) { return FastValue(e, out); }
  static std::string Repr(Element) { return {}; }  // messages are the reference's

 private:
  simdjson::dom::parser* inner_;
};

// The two simdjson parsers of one Loads: the document's and the contexts'.
struct LoadsParsers {
  simdjson::dom::parser document;
  simdjson::dom::parser contexts;
};

// Texts up to this size are read with the calling thread's LoadsParsers,
// larger ones with parsers of their own (see Loads).
inline constexpr std::size_t kMaxReusedParserText = std::size_t{1} << 18;

}  // namespace internal

inline std::string DumpsValue(const Value& value) {
  std::string out;
  internal::AppendPyJson(value, &out);
  return out;
}

inline Value LoadsValue(std::string_view text) {
  return internal::ReadJson(text, internal::kDefaultMaxJsonDepth);
}

inline std::string Dumps(const TreeSpec& spec, int protocol) {
  if (protocol != 1) {
    throw Error("Unknown protocol " + std::to_string(protocol) + ". Available protocols: [1]");
  }
  std::string out = "[1, ";
  out.reserve(static_cast<std::size_t>(spec.num_nodes()) * 56 + 8);
  internal::AppendSchema(spec.raw_nodes(), spec.raw_items(), spec.num_nodes() - 1, &out);
  out.push_back(']');
  return out;
}

inline TreeSpec Loads(std::string_view text) {
  {
    // The parsers are reused per thread: a fresh parser's buffers (several
    // times the text) are big enough for malloc to map them anew on each
    // call, and faulting them in cost more than the parse itself (bench spec
    // of 112 KB: 380 us with fresh parsers, 160 us reused). A thread keeps
    // the buffers of its largest text up to kMaxReusedParserText; larger
    // texts get parsers of their own. Loads calls no user code, so the
    // thread's parsers are never in use twice.
    std::unique_ptr<internal::LoadsParsers> own;
    internal::LoadsParsers* parsers;
    if (text.size() <= internal::kMaxReusedParserText) {
      thread_local internal::LoadsParsers reused;
      parsers = &reused;
    } else {
      own = std::make_unique<internal::LoadsParsers>();
      parsers = own.get();
    }
    simdjson::dom::element doc;
    if (!internal::StartsWithUtf8Bom(text) &&
        parsers->document.parse(text.data(), text.size()).get(doc) == simdjson::SUCCESS) {
      auto data = std::make_shared<internal::SpecData>();
      // At most one node, and about one item, per 50 bytes of torch's output
      // (a leaf's schema alone is 55 bytes): one allocation each.
      data->nodes.reserve(text.size() / 50 + 1);
      data->items.reserve(text.size() / 50 + 1);
      internal::SimdjsonDoc fast(&parsers->contexts);
      simdjson::dom::array top;
      std::int64_t protocol;
      internal::Node root;
      if (doc.get_array().get(top) == simdjson::SUCCESS && top.size() == 2 &&
          top.at(0).get_int64().get(protocol) == simdjson::SUCCESS && protocol == 1 &&
          internal::SchemaReader<internal::SimdjsonDoc>(data.get(), &fast)
              .Read(top.at(1).value_unsafe(), internal::SchemaPath{nullptr, 0}, &root)) {
        return internal::SpecAccess::FromData(std::move(data));
      }
    }
  }
  // Declined or rejected by simdjson: the reference path accepts or throws.
  Value doc = internal::ReadJsonReference(text, internal::kDefaultMaxJsonDepth, {});
  if (!doc.is_list() || doc.as_list().size() != 2) {
    throw ParseError("a serialized spec must be a JSON list [protocol, spec]",
                     ParseError::kNoPosition, "$");
  }
  const Value& protocol = doc.as_list()[0];
  if (protocol.type() != Value::Type::kInt || protocol.as_int() != 1) {
    throw ParseError("Unknown protocol " + protocol.Repr() + ". Available protocols: [1]",
                     ParseError::kNoPosition, "$[0]");
  }
  auto data = std::make_shared<internal::SpecData>();
  internal::ValueDoc reference;
  internal::Node root;
  internal::SchemaReader<internal::ValueDoc>(data.get(), &reference)
      .Read(&doc.as_list()[1], internal::SchemaPath{nullptr, 0}, &root);
  return internal::SpecAccess::FromData(std::move(data));
}

}  // namespace cpytree

#endif  // CPYTREE_JSON_H_
