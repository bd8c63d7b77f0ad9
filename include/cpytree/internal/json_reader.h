// JSON text -> cpytree::Value. Not API.
//
// Two system libraries, one role each:
//   * simdjson (Debian libsimdjson-dev) is the fast path. Its DOM parser
//     validates the whole text (UTF-8, escapes, numbers, structure; NaN,
//     Infinity and lone surrogates are errors) and the Value is built from
//     its tape (FastValue below). json.h's Loads walks the same DOM straight
//     into a spec.
//   * nlohmann-json's SAX parser is the reference path. It runs only when
//     simdjson does not accept a text or the fast path declines it, and then
//     decides: it either reads what simdjson leaves to it (ints beyond 64
//     bits, objects with a repeated key, nesting deeper than kFastJsonDepth)
//     or throws the ParseError, with the byte offset nlohmann reports. So
//     every error message and offset is the one this reader gave before
//     simdjson was added, and hostile input costs two parses, valid input one.
//
// Measured on the protocol-1 text of the ResNet50-sized spec of
// benchmarks/cpp/tree_bench.cc (112 KB, 1721 nodes; Release, g++ 12, simdjson
// 3.0.1 picking its icelake kernel): nlohmann sax_parse with a handler that
// does nothing takes 509 us, nlohmann's DOM 1069 us, simdjson's DOM 52 us (a
// fresh parser per call costs the same as a reused one, 53 us). A 10x faster
// Loads (1267 us before) cannot be had on nlohmann's lexer alone, hence
// simdjson. The engine's C++ treespec_loads (src/spec_model/serialize.cc) can use the
// same library: link simdjson::simdjson and include <simdjson.h>.
//
// The Value keeps what Python's `json.loads` keeps: object members in
// insertion order (a repeated key keeps its first position and last value, as
// in a dict) and ints of any size (kBigInt). Both parsers are iterative, and
// nesting is bounded (kFastJsonDepth for simdjson, which FastValue's
// recursion follows; `max_depth` for nlohmann, whose builder is iterative),
// so hostile input cannot exhaust the stack.
//
//   cpytree::Value v = cpytree::internal::ReadJson("[1, {\"a\": null}]", 512);
#ifndef CPYTREE_INTERNAL_JSON_READER_H_
#define CPYTREE_INTERNAL_JSON_READER_H_

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/value.h"

namespace cpytree {
namespace internal {

// Default bound on the nesting of arrays and objects in one JSON text.
inline constexpr std::size_t kDefaultMaxJsonDepth = 4096;
// Nesting the simdjson fast path takes (its parser's default); deeper texts
// go to the nlohmann reader, which accepts up to the caller's max_depth.
inline constexpr std::size_t kFastJsonDepth = 1024;
static_assert(kFastJsonDepth <= kDefaultMaxJsonDepth,
              "the fast path may decline what the reference path accepts, never the reverse");

// Builds a Value from nlohmann SAX events (the interface sax_parse expects).
class ValueSaxBuilder {
 public:
  using number_integer_t = nlohmann::json::number_integer_t;
  using number_unsigned_t = nlohmann::json::number_unsigned_t;
  using number_float_t = nlohmann::json::number_float_t;
  using string_t = nlohmann::json::string_t;
  using binary_t = nlohmann::json::binary_t;

  explicit ValueSaxBuilder(std::size_t max_depth) : max_depth_(max_depth) {}

  bool null() { return Add(Value()); }
  bool boolean(bool b) { return Add(Value(b)); }
  bool number_integer(number_integer_t i) { return Add(Value(static_cast<std::int64_t>(i))); }
  bool number_unsigned(number_unsigned_t u) { return Add(Value(static_cast<std::uint64_t>(u))); }
  bool number_float(number_float_t f, const string_t& text) {
    // nlohmann reports ints beyond 64 bits as floats; their text has no '.', 'e' or 'E'.
    if (text.find_first_of(".eE") == string_t::npos) return Add(Value::MakeBigInt(text));
    return Add(Value(static_cast<double>(f)));
  }
  bool string(string_t& s) { return Add(Value(std::move(s))); }
  bool binary(binary_t& /*unused*/) { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t /*unused*/) { return Push(true); }
  bool key(string_t& k) {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() { return Pop(); }
  bool start_array(std::size_t /*unused*/) { return Push(false); }
  bool end_array() { return Pop(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& /*unused*/, const Exception& ex) {
    std::string what = ex.what();
    std::size_t close = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] "
    if (what.rfind("[json.exception.", 0) == 0 && close != std::string::npos) {
      what = what.substr(close + 2);
    }
    error_ = "invalid JSON: " + what;
    error_byte_ = position > 0 ? position - 1 : 0;
    return false;
  }

  // The value built; valid after a successful parse.
  Value& result() { return root_; }
  const std::string& error() const { return error_; }
  std::size_t error_byte() const { return error_byte_; }

 private:
  struct Frame {
    bool is_object;
    Value::List list;
    Value::Object object;
    std::string key;
    std::unique_ptr<std::unordered_map<std::string, std::size_t>> index;  // large objects only
  };

  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }
  bool Push(bool is_object) {
    if (stack_.size() >= max_depth_) {
      return Fail("JSON nested deeper than " + std::to_string(max_depth_) + " levels");
    }
    stack_.push_back(Frame{is_object, {}, {}, {}, nullptr});
    return true;
  }
  bool Pop() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return Add(f.is_object ? Value::MakeObject(std::move(f.object))
                           : Value::MakeList(std::move(f.list)));
  }
  bool Add(Value v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = stack_.back();
    if (!f.is_object) {
      f.list.push_back(std::move(v));
      return true;
    }
    // A repeated key keeps its first position and takes the last value (dict semantics).
    constexpr std::size_t kIndexFrom = 16;
    if (f.index == nullptr && f.object.size() >= kIndexFrom) {
      f.index = std::make_unique<std::unordered_map<std::string, std::size_t>>();
      for (std::size_t k = 0; k < f.object.size(); ++k) f.index->emplace(f.object[k].first, k);
    }
    if (f.index != nullptr) {
      auto it = f.index->find(f.key);
      if (it != f.index->end()) {
        f.object[it->second].second = std::move(v);
        return true;
      }
      f.index->emplace(f.key, f.object.size());
    } else {
      for (Value::Member& m : f.object) {
        if (m.first == f.key) {
          m.second = std::move(v);
          return true;
        }
      }
    }
    f.object.emplace_back(std::move(f.key), std::move(v));
    return true;
  }

  std::size_t max_depth_;
  std::vector<Frame> stack_;
  Value root_;
  std::string error_;
  std::size_t error_byte_ = ParseError::kNoPosition;
};

// Python's json.loads rejects a str that starts with U+FEFF ("Unexpected
// UTF-8 BOM"); simdjson >= 3.6 and nlohmann both skip the mark. Every parse
// of this reader and of json.h's Loads checks this first, so what is
// accepted does not depend on the simdjson version.
inline bool StartsWithUtf8Bom(std::string_view text) {
  return text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0;
}

// Builds `*out` from a simdjson DOM element. Returns false for what it
// leaves to the reference reader: an object with a repeated key (Python keeps
// the key's first position and last value) or with more than kFastObjectMembers
// members (the repeated-key check is a linear scan). Recursion is bounded by
// the parser's depth limit (kFastJsonDepth).
inline constexpr std::size_t kFastObjectMembers = 32;
inline bool FastValue(simdjson::dom::element e, Value* out) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::NULL_VALUE:
      *out = Value();
      return true;
    case element_type::BOOL:
      *out = Value(e.get_bool().value_unsafe());
      return true;
    case element_type::INT64:
      *out = Value(e.get_int64().value_unsafe());
      return true;
    case element_type::UINT64:
      *out = Value(e.get_uint64().value_unsafe());
      return true;
    case element_type::DOUBLE:
      *out = Value(e.get_double().value_unsafe());
      return true;
    case element_type::STRING:
      *out = Value(e.get_string().value_unsafe());
      return true;
    case element_type::ARRAY: {
      simdjson::dom::array a = e.get_array().value_unsafe();
      Value::List items(a.size());
      std::size_t k = 0;
      for (simdjson::dom::element item : a) {
        if (!FastValue(item, &items[k++])) return false;
      }
      *out = Value::MakeList(std::move(items));
      return true;
    }
    case element_type::OBJECT: {
      simdjson::dom::object o = e.get_object().value_unsafe();
      if (o.size() > kFastObjectMembers) return false;
      Value::Object members;
      members.reserve(o.size());
      for (simdjson::dom::key_value_pair kv : o) {
        for (const Value::Member& m : members) {
          if (m.first == kv.key) return false;
        }
        members.emplace_back(std::string(kv.key), Value());
        if (!FastValue(kv.value, &members.back().second)) return false;
      }
      *out = Value::MakeObject(std::move(members));
      return true;
    }
    default:  // simdjson 4.5's BIGINT (opt-in, never enabled here) or a newer kind
      break;
  }
  return false;
}

// Parses `text` with simdjson into `*out`; false when simdjson rejects it or
// FastValue declines it (the reference reader then decides).
inline bool FastReadJson(simdjson::dom::parser& parser, std::string_view text, Value* out) {
  simdjson::dom::element root;
  if (StartsWithUtf8Bom(text)) return false;
  if (parser.parse(text.data(), text.size()).get(root) != simdjson::SUCCESS) return false;
  return FastValue(root, out);
}

// The reference reader: nlohmann's SAX parser and ValueSaxBuilder. Throws
// ParseError (byte offset for syntax errors) on malformed input.
inline Value ReadJsonReference(std::string_view text, std::size_t max_depth,
                               const std::string& path) {
  if (StartsWithUtf8Bom(text)) throw ParseError("invalid JSON: Unexpected UTF-8 BOM", 0, path);
  ValueSaxBuilder builder(max_depth);
  bool ok;
  try {
    ok = nlohmann::json::sax_parse(text.data(), text.data() + text.size(), &builder);
  } catch (const nlohmann::json::exception& e) {
    throw ParseError(std::string("invalid JSON: ") + e.what(), ParseError::kNoPosition, path);
  }
  if (!ok) {
    std::string message = builder.error().empty() ? "invalid JSON" : builder.error();
    throw ParseError(message, builder.error_byte(), path);
  }
  return std::move(builder.result());
}

// Parses one JSON text (nothing may follow it) into a Value. Throws
// ParseError (byte offset for syntax errors) on malformed input; `path` is
// copied into the error to say which value was being decoded.
inline Value ReadJson(std::string_view text, std::size_t max_depth, const std::string& path = {}) {
  if (max_depth >= kFastJsonDepth) {
    simdjson::dom::parser parser;
    Value v;
    if (FastReadJson(parser, text, &v)) return v;
  }
  return ReadJsonReference(text, max_depth, path);
}

}  // namespace internal
}  // namespace cpytree

#endif  // CPYTREE_INTERNAL_JSON_READER_H_
