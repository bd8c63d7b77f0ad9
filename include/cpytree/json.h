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

// Reads protocol-1 schemas into SpecData (nodes post-order, items pre-order).
class SchemaReader {
 public:
  friend class FastSchemaReader;

  explicit SchemaReader(SpecData* out) : out_(out) {}

  // Appends the subtree described by `schema`; returns its root's node.
  Node Read(const Value& schema, const SchemaPath& path) {
    if (!schema.is_object()) Fail("a spec node must be a JSON object, got " + schema.Repr(), path);
    const Value& type = Member(schema, "type", path);
    const Value& context = Member(schema, "context", path);
    const Value& children = Member(schema, "children_spec", path);
    if (!children.is_list()) Fail("\"children_spec\" must be a list", path, ".children_spec");
    const Value::List& kids = children.as_list();
    std::uint32_t ctx = static_cast<std::uint32_t>(out_->items.size());
    if (type.is_none()) {
      if (!context.is_none() || !kids.empty()) {
        Fail("a leaf (\"type\": null) must have a null context and no children", path);
      }
      out_->nodes.push_back(MakeNode(NodeKind::kLeaf, 0, ctx, 1, 1));
      return out_->nodes.back();
    }
    if (!type.is_string()) Fail("\"type\" must be a string or null", path, ".type");
    if (kids.size() > std::numeric_limits<std::uint32_t>::max()) Fail("too many children", path);
    NodeKind kind = KindOf(type.as_string());
    ReadContext(kind, type.as_string(), context, kids.size(), path);
    if (out_->items.size() > std::numeric_limits<std::uint32_t>::max()) {
      Fail("too many context items", path);
    }
    std::int64_t leaves = 0, count = 1;
    for (std::size_t k = 0; k < kids.size(); ++k) {
      Node c = Read(kids[k], SchemaPath{&path, k});
      leaves += c.num_leaves;
      count += c.num_nodes;
    }
    out_->nodes.push_back(
        MakeNode(kind, static_cast<std::uint32_t>(kids.size()), ctx, leaves, count));
    return out_->nodes.back();
  }

 private:
  [[noreturn]] static void Fail(const std::string& message, const SchemaPath& path,
                                const char* suffix = "") {
    throw ParseError(message, ParseError::kNoPosition, path.Format(suffix));
  }
  static const Value& Member(const Value& schema, const char* key, const SchemaPath& path) {
    const Value* v = schema.Find(key);
    if (v == nullptr) Fail(std::string("a spec node needs the key \"") + key + "\"", path);
    return *v;
  }
  static NodeKind KindOf(std::string_view type) { return KindOfSerializedTypeName(type); }
  // Decodes a context that torch stores as JSON text inside a JSON string.
  static Value Decode(const Value& context, const SchemaPath& path) {
    if (!context.is_string()) Fail("\"context\" must be a string of JSON text", path, ".context");
    const std::string& text = context.as_string();
    if (text == "null") return Value();  // tuple, list and most deques
    try {
      return ReadJson(text, kDefaultMaxJsonDepth);
    } catch (const ParseError& e) {
      Fail(std::string("\"context\" is not valid JSON text: ") + e.what(), path, ".context");
    }
  }
  void CheckKeys(const Value& keys, std::size_t arity, const SchemaPath& path, const char* suffix) {
    if (!keys.is_list()) Fail("the keys must be a JSON list, got " + keys.Repr(), path, suffix);
    if (keys.as_list().size() != arity) {
      Fail("the node has " + std::to_string(keys.as_list().size()) + " keys but " +
               std::to_string(arity) + " children",
           path, suffix);
    }
  }
  void ReadContext(NodeKind kind, const std::string& type, const Value& context, std::size_t arity,
                   const SchemaPath& path) {
    std::vector<Value>& items = out_->items;
    switch (kind) {
      case NodeKind::kTuple:
      case NodeKind::kList:
        if (!Decode(context, path).is_none()) {
          Fail("the context of " + type + " must be \"null\"", path, ".context");
        }
        return;
      case NodeKind::kDict:
      case NodeKind::kOrderedDict: {
        Value keys = Decode(context, path);
        CheckKeys(keys, arity, path, ".context");
        for (const Value& k : keys.as_list()) items.push_back(k);
        return;
      }
      case NodeKind::kDefaultDict: {
        if (!context.is_object() || context.as_object().size() != 3) {
          Fail(
              "the context of collections.defaultdict must be an object with exactly the keys "
              "default_factory_module, default_factory_name, dict_context",
              path, ".context");
        }
        const Value* module = context.Find("default_factory_module");
        const Value* name = context.Find("default_factory_name");
        const Value* keys = context.Find("dict_context");
        if (module == nullptr || name == nullptr || keys == nullptr) {
          Fail(
              "the context of collections.defaultdict must have the keys "
              "default_factory_module, default_factory_name, dict_context",
              path, ".context");
        }
        if (!module->is_string() || !name->is_string()) {
          Fail("default_factory_module and default_factory_name must be strings", path, ".context");
        }
        CheckKeys(*keys, arity, path, ".context.dict_context");
        items.push_back(Value::MakeList({*module, *name}));
        for (const Value& k : keys->as_list()) items.push_back(k);
        return;
      }
      case NodeKind::kNamedTuple:
        if (!context.is_string() || context.as_string().empty()) {
          Fail("the context of collections.namedtuple must be the class's serialized name", path,
               ".context");
        }
        items.push_back(context);
        return;
      case NodeKind::kDeque: {
        Value maxlen = Decode(context, path);
        if (!(maxlen.is_none() || (maxlen.type() == Value::Type::kInt && maxlen.as_int() >= 0))) {
          Fail("the maxlen of collections.deque must be null or an int >= 0", path, ".context");
        }
        items.push_back(std::move(maxlen));
        return;
      }
      case NodeKind::kCustom:
        if (type.empty()) Fail("\"type\" must not be empty", path, ".type");
        items.push_back(Value(type));
        items.push_back(context);
        return;
      case NodeKind::kLeaf:
        return;
    }
  }

  SpecData* out_;
};

// Reads a protocol-1 document from simdjson's DOM straight into SpecData
// (no Value for the document itself: only context items become Values).
// Accepts only what SchemaReader accepts, with the same result, and declines
// (returns false) everything else, including shapes SchemaReader would still
// accept (extra members, a tuple context like " null ", deep nesting): Loads
// then runs the reference path (nlohmann + SchemaReader), which accepts them
// or throws the ParseError with its offset or JSON path.
class FastSchemaReader {
 public:
  // True when `key` is `name` (a literal; a fixed-size compare the compiler inlines).
  template <std::size_t N>
  static bool KeyIs(std::string_view key, const char (&name)[N]) {
    return key.size() == N - 1 && std::memcmp(key.data(), name, N - 1) == 0;
  }

  // `inner` parses the contexts stored as JSON text; it must not be the
  // parser that holds the document being read.
  FastSchemaReader(SpecData* out, simdjson::dom::parser* inner) : out_(out), inner_(inner) {}

  // Reads `[1, schema]`; false when declined (`*out` is then partly filled).
  bool ReadDocument(simdjson::dom::element doc) {
    simdjson::dom::array top;
    if (doc.get_array().get(top) != simdjson::SUCCESS || top.size() != 2) return false;
    std::int64_t protocol;
    if (top.at(0).get_int64().get(protocol) != simdjson::SUCCESS || protocol != 1) return false;
    Node root;
    return Read(top.at(1).value_unsafe(), &root);
  }

 private:
  using Element = simdjson::dom::element;

  bool Read(Element schema, Node* node) {
    simdjson::dom::object fields;
    if (schema.get_object().get(fields) != simdjson::SUCCESS || fields.size() != 3) return false;
    Element type, context, children;
    int seen = 0;  // bit per member: exactly the three names, each once
    for (simdjson::dom::key_value_pair kv : fields) {
      if (KeyIs(kv.key, "type")) {
        type = kv.value, seen |= 1;
      } else if (KeyIs(kv.key, "context")) {
        context = kv.value, seen |= 2;
      } else if (KeyIs(kv.key, "children_spec")) {
        children = kv.value, seen |= 4;
      }
    }
    simdjson::dom::array kids;
    if (seen != 7 || children.get_array().get(kids) != simdjson::SUCCESS) return false;
    std::uint32_t ctx = static_cast<std::uint32_t>(out_->items.size());
    if (type.is_null()) {
      if (!context.is_null() || kids.size() != 0) return false;
      out_->nodes.push_back(MakeNode(NodeKind::kLeaf, 0, ctx, 1, 1));
      *node = out_->nodes.back();
      return true;
    }
    std::string_view type_name;
    if (type.get_string().get(type_name) != simdjson::SUCCESS || type_name.empty()) return false;
    std::size_t arity = kids.size();
    NodeKind kind = SchemaReader::KindOf(type_name);
    if (arity > std::numeric_limits<std::uint32_t>::max() ||
        !ReadContext(kind, type_name, context, arity) ||
        out_->items.size() > std::numeric_limits<std::uint32_t>::max()) {
      return false;
    }
    std::int64_t leaves = 0, count = 1;
    for (Element kid : kids) {
      Node c;
      if (!Read(kid, &c)) return false;
      leaves += c.num_leaves;
      count += c.num_nodes;
    }
    out_->nodes.push_back(MakeNode(kind, static_cast<std::uint32_t>(arity), ctx, leaves, count));
    *node = out_->nodes.back();
    return true;
  }

  // Parses a context stored as JSON text in a JSON string (the inner parser
  // is reused; the outer document lives in another parser).
  bool ParseInner(Element context, Element* out) {
    std::string_view text;
    if (context.get_string().get(text) != simdjson::SUCCESS) return false;
    return !StartsWithUtf8Bom(text) &&
           inner_->parse(text.data(), text.size()).get(*out) == simdjson::SUCCESS;
  }
  // Appends `arity` keys from a JSON list element.
  bool AppendKeys(Element keys, std::size_t arity) {
    simdjson::dom::array list;
    if (keys.get_array().get(list) != simdjson::SUCCESS || list.size() != arity) return false;
    std::vector<Value>& items = out_->items;
    for (Element k : list) {
      if (k.is_string()) {  // the common key, built in place
        items.emplace_back(k.get_string().value_unsafe());
        continue;
      }
      items.emplace_back();
      if (!FastValue(k, &items.back())) return false;
    }
    return true;
  }
  bool ReadContext(NodeKind kind, std::string_view type, Element context, std::size_t arity) {
    std::vector<Value>& items = out_->items;
    switch (kind) {
      case NodeKind::kTuple:
      case NodeKind::kList: {
        std::string_view text;
        return context.get_string().get(text) == simdjson::SUCCESS && text == "null";
      }
      case NodeKind::kDict:
      case NodeKind::kOrderedDict: {
        Element keys;
        return ParseInner(context, &keys) && AppendKeys(keys, arity);
      }
      case NodeKind::kDefaultDict: {
        simdjson::dom::object o;
        if (context.get_object().get(o) != simdjson::SUCCESS || o.size() != 3) return false;
        Element module, name, keys;
        int seen = 0;
        for (simdjson::dom::key_value_pair kv : o) {
          if (KeyIs(kv.key, "default_factory_module")) {
            module = kv.value, seen |= 1;
          } else if (KeyIs(kv.key, "default_factory_name")) {
            name = kv.value, seen |= 2;
          } else if (KeyIs(kv.key, "dict_context")) {
            keys = kv.value, seen |= 4;
          }
        }
        if (seen != 7 || !module.is_string() || !name.is_string()) return false;
        items.push_back(Value::MakeList(
            {Value(module.get_string().value_unsafe()), Value(name.get_string().value_unsafe())}));
        return AppendKeys(keys, arity);
      }
      case NodeKind::kNamedTuple: {
        std::string_view name;
        if (context.get_string().get(name) != simdjson::SUCCESS || name.empty()) return false;
        items.emplace_back(name);
        return true;
      }
      case NodeKind::kDeque: {
        Element maxlen;
        if (!ParseInner(context, &maxlen)) return false;
        if (maxlen.is_null()) {
          items.emplace_back();
          return true;
        }
        std::int64_t n;
        if (!maxlen.is_int64() || maxlen.get_int64().get(n) != simdjson::SUCCESS || n < 0) {
          return false;
        }
        items.emplace_back(n);
        return true;
      }
      case NodeKind::kCustom:
        items.emplace_back(type);
        items.emplace_back();
        return FastValue(context, &items.back());
      case NodeKind::kLeaf:
        return false;
    }
    return false;
  }

  SpecData* out_;
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
      if (internal::FastSchemaReader(data.get(), &parsers->contexts).ReadDocument(doc)) {
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
  internal::SchemaReader reader(data.get());
  reader.Read(doc.as_list()[1], internal::SchemaPath{nullptr, 0});
  return internal::SpecAccess::FromData(std::move(data));
}

}  // namespace cpytree

#endif  // CPYTREE_JSON_H_
