// Text formatting that reproduces CPython byte for byte. Not API.
//
// - `AppendPyStrRepr`: `repr(str)`, with Python's choice of quotes and its
//   escapes (\\, \n, \r, \t, \xNN, \uNNNN, \UNNNNNNNN for non-printables).
// - `AppendPyFloatRepr`: `repr(float)`, the shortest round-tripping digits in
//   Python's layout (`1e+16`, `1000000000000000.0`, `1e-05`, `inf`).
// - `AppendJsonString` / `AppendJsonFloat`: what `json.dumps` writes with its
//   defaults (`ensure_ascii=True`, `allow_nan=True`).
//
// Strings are UTF-8 in C++ and sequences of code points in Python; the
// decoder here is strict (no overlongs, no surrogates, nothing past U+10FFFF).
//
//   std::string s;
//   cpytree::internal::AppendPyFloatRepr(&s, 1e16);  // s == "1e+16"
#ifndef CPYTREE_INTERNAL_PY_FORMAT_H_
#define CPYTREE_INTERNAL_PY_FORMAT_H_

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>

#include "cpytree/errors.h"
#include "cpytree/internal/unicode_printable.h"

namespace cpytree {
namespace internal {

// Decodes the code point at `s[*i]`, advancing `*i`. Returns false (and
// advances by one byte) on a malformed sequence.
inline bool DecodeUtf8(std::string_view s, std::size_t* i, std::uint32_t* cp) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b0 = byte(*i);
  if (b0 < 0x80) {
    *cp = b0;
    ++*i;
    return true;
  }
  int len;
  std::uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, min = 0x80, *cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min = 0x800, *cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, *cp = b0 & 0x07;
  } else {
    ++*i;
    return false;
  }
  if (*i + len > s.size()) {
    ++*i;
    return false;
  }
  for (int k = 1; k < len; ++k) {
    unsigned char b = byte(*i + k);
    if ((b & 0xC0) != 0x80) {
      ++*i;
      return false;
    }
    *cp = (*cp << 6) | (b & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) {
    ++*i;
    return false;
  }
  *i += len;
  return true;
}

// True when `s` is well-formed UTF-8 without surrogates.
inline bool IsValidUtf8(std::string_view s) {
  std::size_t i = 0;
  std::uint32_t cp;
  while (i < s.size()) {
    if (!DecodeUtf8(s, &i, &cp)) return false;
  }
  return true;
}

// Appends `\` `c` and `digits` lowercase hex digits of `v`.
inline void AppendHexEscape(std::string* out, char c, std::uint32_t v, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('\\');
  out->push_back(c);
  for (int k = digits - 1; k >= 0; --k) out->push_back(kHex[(v >> (4 * k)) & 0xF]);
}

// Appends Python's `repr(s)` for the UTF-8 string `s`. A malformed byte is
// shown as `\xNN` (Python strings cannot hold one; this keeps output ASCII-safe).
inline void AppendPyStrRepr(std::string* out, std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t start = i;
    std::uint32_t cp;
    if (!DecodeUtf8(s, &i, &cp)) {
      AppendHexEscape(out, 'x', static_cast<unsigned char>(s[start]), 2);
      continue;
    }
    if (cp == static_cast<std::uint32_t>(quote) || cp == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out->append("\\t");
    } else if (cp == '\n') {
      out->append("\\n");
    } else if (cp == '\r') {
      out->append("\\r");
    } else if (cp < 0x20 || cp == 0x7F) {  // NOLINT(bugprone-branch-clone): the printable
      AppendHexEscape(out, 'x', cp, 2);    // test must come between the two \x cases
    } else if (cp < 0x7F || IsPythonPrintable(cp)) {
      out->append(s.data() + start, i - start);
    } else if (cp <= 0xFF) {
      AppendHexEscape(out, 'x', cp, 2);
    } else if (cp <= 0xFFFF) {
      AppendHexEscape(out, 'u', cp, 4);
    } else {
      AppendHexEscape(out, 'U', cp, 8);
    }
  }
  out->push_back(quote);
}

// Appends code point `cp` as `json.dumps` (ensure_ascii) writes it inside a
// string: printable ASCII as is, short escapes for quote, backslash and
// \n \r \t \b \f, `\uXXXX` otherwise (astral code points as a surrogate pair).
// The engine's dumps (src/spec_model/serialize.cc) writes Python str code points with it.
inline void AppendJsonCodePoint(std::string* out, std::uint32_t cp) {
  if (cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\') {
    out->push_back(static_cast<char>(cp));
    return;
  }
  switch (cp) {
    case '"':
      out->append("\\\"");
      return;
    case '\\':
      out->append("\\\\");
      return;
    case '\n':
      out->append("\\n");
      return;
    case '\r':
      out->append("\\r");
      return;
    case '\t':
      out->append("\\t");
      return;
    case '\b':
      out->append("\\b");
      return;
    case '\f':
      out->append("\\f");
      return;
    default:
      break;
  }
  if (cp <= 0xFFFF) {
    AppendHexEscape(out, 'u', cp, 4);
  } else {
    std::uint32_t v = cp - 0x10000;
    AppendHexEscape(out, 'u', 0xD800 + (v >> 10), 4);
    AppendHexEscape(out, 'u', 0xDC00 + (v & 0x3FF), 4);
  }
}

// Appends `s` as `json.dumps` writes a str: quoted, ASCII only, astral code
// points as surrogate pairs. Throws Error on malformed UTF-8.
inline void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  std::size_t i = 0;
  while (i < s.size()) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {  // the common case
      out->push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    std::uint32_t cp;
    if (!DecodeUtf8(s, &i, &cp)) {
      throw Error("cannot serialize a string that is not valid UTF-8");
    }
    AppendJsonCodePoint(out, cp);
  }
  out->push_back('"');
}

// Appends a finite `v` the way CPython's `float.__repr__` does.
inline void AppendFiniteFloat(std::string* out, double v) {
  // Shortest round-trip digits, as "d.ddde±XX" (C++17 to_chars, like Python's dtoa mode 0).
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  std::size_t pos = 0;
  if (sci[0] == '-') {
    out->push_back('-');
    pos = 1;
  }
  std::size_t e = sci.find('e');
  std::string digits;
  for (std::size_t k = pos; k < e; ++k) {
    if (sci[k] != '.') digits.push_back(sci[k]);
  }
  int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
  // Python strips trailing zeros of the significand ("1e+16", not "1.0e+16").
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int ndigits = static_cast<int>(digits.size());
  int decpt = exp10 + 1;  // position of the decimal point relative to the digits
  if (decpt <= -4 || decpt > 16) {
    out->push_back(digits[0]);
    if (ndigits > 1) {
      out->push_back('.');
      out->append(digits, 1, std::string::npos);
    }
    int mag = std::abs(exp10);  // at most 324 for a double
    out->push_back('e');
    out->push_back(exp10 < 0 ? '-' : '+');
    if (mag >= 100) out->push_back(static_cast<char>('0' + mag / 100));
    out->push_back(static_cast<char>('0' + mag / 10 % 10));
    out->push_back(static_cast<char>('0' + mag % 10));
  } else if (decpt <= 0) {
    out->append("0.");
    out->append(static_cast<std::size_t>(-decpt), '0');
    out->append(digits);
  } else if (decpt < ndigits) {
    out->append(digits, 0, static_cast<std::size_t>(decpt));
    out->push_back('.');
    out->append(digits, static_cast<std::size_t>(decpt), std::string::npos);
  } else {
    out->append(digits);
    out->append(static_cast<std::size_t>(decpt - ndigits), '0');
    out->append(".0");
  }
}

// Appends Python's `repr(v)`: finite values as above, else `inf`, `-inf`, `nan`.
inline void AppendPyFloatRepr(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("nan");
  } else if (std::isinf(v)) {
    out->append(v < 0 ? "-inf" : "inf");
  } else {
    AppendFiniteFloat(out, v);
  }
}

// Appends what `json.dumps(v)` writes: `NaN`, `Infinity`, `-Infinity` or the repr.
inline void AppendJsonFloat(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v < 0 ? "-Infinity" : "Infinity");
  } else {
    AppendFiniteFloat(out, v);
  }
}

}  // namespace internal
}  // namespace cpytree

#endif  // CPYTREE_INTERNAL_PY_FORMAT_H_
