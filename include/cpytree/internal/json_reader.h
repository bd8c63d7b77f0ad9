// JSON text -> cpytree::Value, on top of nlohmann-json's SAX parser. Not API.
//
// The SAX interface is used rather than nlohmann's DOM because the Value must
// keep what Python's `json.loads` keeps and the DOM loses: object members in
// insertion order (a repeated key keeps its first position and last value,
// as in a dict), and ints of any size (nlohmann turns those into doubles; the
// SAX event still carries the original text). nlohmann's parser is iterative,
// and `max_depth` bounds the nesting the builder accepts, so hostile input
// cannot exhaust the stack.
//
//   cpytree::Value v = cpytree::internal::ReadJson("[1, {\"a\": null}]", 512);
#ifndef CPYTREE_INTERNAL_JSON_READER_H_
#define CPYTREE_INTERNAL_JSON_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpytree/errors.h"
#include "cpytree/value.h"

namespace cpytree {
namespace internal {

// Default bound on the nesting of arrays and objects in one JSON text.
inline constexpr std::size_t kDefaultMaxJsonDepth = 4096;

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

// Parses one JSON text (nothing may follow it) into a Value. Throws
// ParseError (byte offset for syntax errors) on malformed input; `path` is
// copied into the error to say which value was being decoded.
inline Value ReadJson(std::string_view text, std::size_t max_depth, const std::string& path = {}) {
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

}  // namespace internal
}  // namespace cpytree

#endif  // CPYTREE_INTERNAL_JSON_READER_H_
