// Exception types of the header-only library.
//
// Every failure the library reports on bad input is one of these, derived from
// `cpytree::Error` (itself a `std::runtime_error`), so callers can catch one
// type. None of the library's entry points has undefined behaviour on bad
// input: it throws instead.
//
//   ParseError       protocol-1 JSON that is malformed or does not describe a
//                    valid spec; says where (byte offset and/or JSON path).
//   StructureError   a tree or leaf list that does not fit a spec or a C++
//                    type; says where (a key path such as `tree[0]['a']`).
//   Error            anything else (e.g. a value that cannot be serialized).
//
// Example:
//   try {
//     cpytree::TreeSpec spec = cpytree::Loads(text);
//   } catch (const cpytree::ParseError& e) {
//     std::cerr << e.what() << " (byte " << e.byte() << ")\n";
//   }
#ifndef CPYTREE_ERRORS_H_
#define CPYTREE_ERRORS_H_

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace cpytree {

// Base of every exception the library throws on bad input.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Malformed or invalid protocol-1 JSON.
class ParseError : public Error {
 public:
  // `byte()` when the error has no byte position (a semantic error).
  static constexpr std::size_t kNoPosition = static_cast<std::size_t>(-1);

  // Makes an error; `what()` is `message` followed by the location.
  ParseError(const std::string& message, std::size_t byte, std::string path)
      : Error(Format(message, byte, path)), byte_(byte), path_(std::move(path)) {}

  // Zero-based byte offset in the input where parsing failed, or kNoPosition.
  std::size_t byte() const { return byte_; }
  // JSON path of the offending value, e.g. `$[1].children_spec[0].context`;
  // empty when the error is in the JSON syntax itself.
  const std::string& path() const { return path_; }

 private:
  static std::string Format(const std::string& message, std::size_t byte, const std::string& path) {
    std::string out = message;
    if (!path.empty()) out += " (at " + path + ")";
    if (byte != kNoPosition) out += " (at byte " + std::to_string(byte) + ")";
    return out;
  }

  std::size_t byte_;
  std::string path_;
};

// A tree, leaf list or C++ value that does not match a spec.
class StructureError : public Error {
 public:
  // Makes an error; `what()` is `message` followed by ` (at key path <path>)`
  // unless `key_path` is empty (a global mismatch, e.g. a leaf count).
  StructureError(const std::string& message, std::string key_path)
      : Error(key_path.empty() ? message : message + " (at key path " + key_path + ")"),
        key_path_(std::move(key_path)) {}

  // Key path of the mismatching node from the root, e.g. `tree[0]['a']`.
  const std::string& key_path() const { return key_path_; }

 private:
  std::string key_path_;
};

}  // namespace cpytree

#endif  // CPYTREE_ERRORS_H_
