// A small JSON decoder with no dependency, for one job in the core: showing a
// custom node's context in `TreeSpec::ToString()`. Not API.
//
// torch keeps the context of a custom node registered without
// `to_dumpable_context` as JSON text, and its repr shows the decoded object
// (`[['weight', 'shift'], []]`, not the text). The core may not depend on a
// JSON library (json.h, which reads whole specs, does), so this decodes the
// few bytes a context holds. It accepts strict JSON (RFC 8259: no NaN, no
// trailing commas, no leading zeros), nesting up to kMaxDepth, and returns
// nullopt for anything else; the caller then shows the text as it is.
//
//   std::optional<Value> v = DecodeContextText(R"([["a"], 1.5, null])");
#ifndef CPYTREE_INTERNAL_CONTEXT_TEXT_H_
#define CPYTREE_INTERNAL_CONTEXT_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/value.h"

namespace cpytree {
namespace internal {

class ContextTextDecoder {
 public:
  static constexpr int kMaxDepth = 256;

  explicit ContextTextDecoder(std::string_view text) : s_(text) {}

  std::optional<Value> Decode() {
    Value v;
    if (!ParseValue(&v, 0)) return std::nullopt;
    SkipSpace();
    if (i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void SkipSpace() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool Hex4(std::uint32_t* out) {
    if (i_ + 4 > s_.size()) return false;
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    *out = v;
    return true;
  }
  static void AppendUtf8(std::uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  bool ParseString(std::string* out) {
    ++i_;  // the opening quote
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          std::uint32_t cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(i_, 2) == "\\u") {
            std::size_t save = i_;
            i_ += 2;
            std::uint32_t lo;
            if (Hex4(&lo) && lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              i_ = save;
            }
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }
  bool ParseNumber(Value* out) {
    std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      std::size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - d;
    };
    std::size_t int_start = i_;
    std::size_t n = digits();
    if (n == 0 || (n > 1 && s_[int_start] == '0')) return false;
    bool is_float = false;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) return false;
      is_float = true;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) return false;
      is_float = true;
    }
    std::string text(s_.substr(start, i_ - start));
    if (!is_float) {
      *out = Value::MakeBigInt(text);
      return true;
    }
    *out = Value(std::strtod(text.c_str(), nullptr));
    return true;
  }
  bool ParseValue(Value* out, int depth) {
    if (depth > kMaxDepth) return false;
    SkipSpace();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '"') {
      std::string str;
      if (!ParseString(&str)) return false;
      *out = Value(std::move(str));
      return true;
    }
    if (c == '[') {
      ++i_;
      Value::List items;
      SkipSpace();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        *out = Value::MakeList(std::move(items));
        return true;
      }
      for (;;) {
        items.emplace_back();
        if (!ParseValue(&items.back(), depth + 1)) return false;
        SkipSpace();
        if (i_ >= s_.size()) return false;
        if (s_[i_] == ']') break;
        if (s_[i_++] != ',') return false;
      }
      ++i_;
      *out = Value::MakeList(std::move(items));
      return true;
    }
    if (c == '{') {
      ++i_;
      Value::Object members;
      SkipSpace();
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        *out = Value::MakeObject(std::move(members));
        return true;
      }
      for (;;) {
        SkipSpace();
        if (i_ >= s_.size() || s_[i_] != '"') return false;
        std::string key;
        if (!ParseString(&key)) return false;
        SkipSpace();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        Value v;
        if (!ParseValue(&v, depth + 1)) return false;
        // A repeated key keeps its first position and its last value (a dict).
        Value::Member* seen = nullptr;
        for (Value::Member& m : members) {
          if (m.first == key) {
            seen = &m;
            break;
          }
        }
        if (seen != nullptr) {
          seen->second = std::move(v);
        } else {
          members.emplace_back(std::move(key), std::move(v));
        }
        SkipSpace();
        if (i_ >= s_.size()) return false;
        if (s_[i_] == '}') break;
        if (s_[i_++] != ',') return false;
      }
      ++i_;
      *out = Value::MakeObject(std::move(members));
      return true;
    }
    if (c == 't') return Literal("true") && (*out = Value(true), true);
    if (c == 'f') return Literal("false") && (*out = Value(false), true);
    if (c == 'n') return Literal("null") && (*out = Value(), true);
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    return false;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

// The object JSON `text` decodes to, or nullopt when it is not strict JSON.
inline std::optional<Value> DecodeContextText(std::string_view text) {
  return ContextTextDecoder(text).Decode();
}

}  // namespace internal
}  // namespace cpytree

#endif  // CPYTREE_INTERNAL_CONTEXT_TEXT_H_
