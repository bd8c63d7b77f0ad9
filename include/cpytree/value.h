// `cpytree::Value`: a JSON-shaped value that stands for the Python objects a
// spec carries as context (dict keys, a deque's maxlen, a custom node's
// serialized context, ...).
//
// A Value is None, a bool, an int, a float, a str, a list or a str-keyed
// object (insertion-ordered, like a Python dict), which is everything
// protocol-1 JSON can hold. Ints outside int64 are kept exactly as decimal
// text (`Type::kBigInt`), because Python ints have no size limit.
//
// Comparison follows Python's `==`, which is what torch's TreeSpec equality
// uses: `1 == 1.0 == True`, lists compare element-wise and objects ignore
// member order. `Hash()` agrees with it. One exception: NaN equals NaN, so a
// spec is always equal to itself.
//
// `Repr()` is Python's `repr()` of the decoded object: `'a'`, `"it's"`, `1.5`,
// `None`, `[1, 'b']`, `{'k': True}`.
//
// Example:
//   cpytree::Value key = "weight";
//   cpytree::Value keys = cpytree::Value::MakeList({key, 3, nullptr});
//   keys.Repr();  // "['weight', 3, None]"
#ifndef CPYTREE_VALUE_H_
#define CPYTREE_VALUE_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cpytree/errors.h"
#include "cpytree/internal/hash_mix.h"
#include "cpytree/internal/py_format.h"

namespace cpytree {

// A JSON-shaped value with Python semantics. Cheap to move; copies deeply.
class Value {
 public:
  // What a Value holds. Values are stable.
  enum class Type : std::uint8_t {
    kNone = 0,
    kBool = 1,
    kInt = 2,     // fits in std::int64_t
    kBigInt = 3,  // an int outside int64, kept as canonical decimal text
    kFloat = 4,
    kString = 5,  // UTF-8
    kList = 6,
    kObject = 7,  // str keys, insertion order
  };
  using List = std::vector<Value>;
  using Member = std::pair<std::string, Value>;
  using Object = std::vector<Member>;

  // None.
  Value() noexcept = default;
  // None.
  Value(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor)
  // A bool (only an exact `bool`: pointers do not silently become one).
  template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
  Value(B b) noexcept : data_(b) {}  // NOLINT(google-explicit-constructor)
  // An int of any integral type; unsigned values above INT64_MAX become kBigInt.
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Value(I i) {  // NOLINT(google-explicit-constructor)
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(std::int64_t)) {
      if (i > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        data_ = BigIntText{std::to_string(i)};
        return;
      }
    }
    data_ = static_cast<std::int64_t>(i);
  }
  // A float.
  template <class F, std::enable_if_t<std::is_floating_point_v<F>, int> = 0>
  Value(F f) noexcept : data_(static_cast<double>(f)) {}  // NOLINT(google-explicit-constructor)
  // A str (UTF-8).
  Value(std::string s) noexcept : data_(std::move(s)) {}  // NOLINT(google-explicit-constructor)
  // A str (UTF-8).
  Value(std::string_view s) : data_(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  // A str (UTF-8).
  Value(const char* s) : data_(std::string(s)) {}  // NOLINT(google-explicit-constructor)

  // A list of values.
  static Value MakeList(List items) {
    Value v;
    v.data_ = std::move(items);
    return v;
  }
  // An object; members keep their order. Keys must be distinct.
  static Value MakeObject(Object members) {
    Value v;
    v.data_ = std::move(members);
    return v;
  }
  // An int given as decimal text (`-?[0-9]+`, no leading zeros); becomes kInt
  // when it fits in int64. Throws Error on anything else.
  static Value MakeBigInt(std::string_view digits) {
    std::size_t start = (!digits.empty() && digits[0] == '-') ? 1 : 0;
    bool ok = digits.size() > start && (digits[start] != '0' || digits.size() == start + 1);
    for (std::size_t k = start; ok && k < digits.size(); ++k) {
      ok = digits[k] >= '0' && digits[k] <= '9';
    }
    if (!ok) throw Error("not a decimal integer: '" + std::string(digits) + "'");
    if (digits == "-0") return Value(0);
    std::int64_t small = 0;
    auto res = std::from_chars(digits.data(), digits.data() + digits.size(), small);
    if (res.ec == std::errc() && res.ptr == digits.data() + digits.size()) return Value(small);
    Value v;
    v.data_ = BigIntText{std::string(digits)};
    return v;
  }

  // The kind of value held.
  Type type() const { return static_cast<Type>(data_.index()); }
  bool is_none() const { return type() == Type::kNone; }
  bool is_bool() const { return type() == Type::kBool; }
  // True for kInt and kBigInt (not for bools).
  bool is_int() const { return type() == Type::kInt || type() == Type::kBigInt; }
  bool is_float() const { return type() == Type::kFloat; }
  bool is_string() const { return type() == Type::kString; }
  bool is_list() const { return type() == Type::kList; }
  bool is_object() const { return type() == Type::kObject; }

  // The bool held; throws Error if this is not a bool.
  bool as_bool() const { return Get<bool>("a bool"); }
  // The int held; throws Error if this is not a kInt.
  std::int64_t as_int() const { return Get<std::int64_t>("an int64"); }
  // The decimal text of any int (kInt or kBigInt); throws Error otherwise.
  std::string int_text() const {
    if (type() == Type::kInt) return std::to_string(std::get<std::int64_t>(data_));
    return Get<BigIntText>("an int").digits;
  }
  // The float held; throws Error if this is not a float.
  double as_float() const { return Get<double>("a float"); }
  // The string held; throws Error if this is not a str.
  const std::string& as_string() const { return Get<std::string>("a str"); }
  // The items held; throws Error if this is not a list.
  const List& as_list() const { return Get<List>("a list"); }
  // The members held; throws Error if this is not an object.
  const Object& as_object() const { return Get<Object>("an object"); }
  // The value of member `key`, or nullptr; throws Error if this is not an object.
  const Value* Find(std::string_view key) const {
    for (const Member& m : as_object()) {
      if (m.first == key) return &m.second;
    }
    return nullptr;
  }

  // Python's `repr()` of the decoded object.
  std::string Repr() const {
    std::string out;
    AppendRepr(&out);
    return out;
  }
  // Python's `str()`: a str as its raw text, anything else as `Repr()`.
  std::string Str() const { return is_string() ? as_string() : Repr(); }
  // Appends `Repr()` to `out`.
  void AppendRepr(std::string* out) const;

  // A hash consistent with `==` (so 1, 1.0 and True hash alike).
  std::size_t Hash() const;
  // Python `==`, see the file comment.
  friend bool operator==(const Value& a, const Value& b) { return a.Equals(b); }
  friend bool operator!=(const Value& a, const Value& b) { return !a.Equals(b); }
  // True when both hold the same type and value (1 and 1.0 are not identical).
  bool IdenticalTo(const Value& other) const;

 private:
  struct BigIntText {
    std::string digits;
  };
  using Data = std::variant<std::monostate, bool, std::int64_t, BigIntText, double, std::string,
                            List, Object>;
  static_assert(std::variant_size_v<Data> == 8, "one alternative per Value::Type, in order");

  template <class X>
  const X& Get(const char* what) const {
    if (const X* x = std::get_if<X>(&data_)) return *x;
    throw Error(std::string("context value is not ") + what + ": " + Repr());
  }
  bool Equals(const Value& other) const;

  Data data_;
};

namespace internal {

// Decimal text of an integral double (glibc prints %.0f exactly).
inline std::string IntegralDoubleText(double f) {
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.0f", f);
  return buf;
}

// True when `f` is integral and representable as int64 (then `*i` is set).
inline bool DoubleToInt64(double f, std::int64_t* i) {
  if (!(f == std::floor(f)) || f < -9223372036854775808.0 || f >= 9223372036854775808.0) {
    return false;
  }
  *i = static_cast<std::int64_t>(f);
  return true;
}

}  // namespace internal

inline void Value::AppendRepr(std::string* out) const {
  switch (type()) {
    case Type::kNone:
      out->append("None");
      return;
    case Type::kBool:
      out->append(std::get<bool>(data_) ? "True" : "False");
      return;
    case Type::kInt:
      out->append(std::to_string(std::get<std::int64_t>(data_)));
      return;
    case Type::kBigInt:
      out->append(std::get<BigIntText>(data_).digits);
      return;
    case Type::kFloat:
      internal::AppendPyFloatRepr(out, std::get<double>(data_));
      return;
    case Type::kString:
      internal::AppendPyStrRepr(out, std::get<std::string>(data_));
      return;
    case Type::kList: {
      out->push_back('[');
      const List& items = std::get<List>(data_);
      for (std::size_t k = 0; k < items.size(); ++k) {
        if (k) out->append(", ");
        items[k].AppendRepr(out);
      }
      out->push_back(']');
      return;
    }
    case Type::kObject: {
      const Object& members = std::get<Object>(data_);
      // torch decodes {"__enum__": true, "fqn": "mod:Cls", "name": "X"} into the
      // enum member; its value is unknown here, so show `<Cls.X>`.
      const Value* fqn = Find("fqn");
      const Value* name = Find("name");
      if (Find("__enum__") && fqn && fqn->is_string() && name && name->is_string()) {
        const std::string& f = fqn->as_string();
        out->append("<" + f.substr(f.find(':') + 1) + "." + name->as_string() + ">");
        return;
      }
      out->push_back('{');
      for (std::size_t k = 0; k < members.size(); ++k) {
        if (k) out->append(", ");
        internal::AppendPyStrRepr(out, members[k].first);
        out->append(": ");
        members[k].second.AppendRepr(out);
      }
      out->push_back('}');
      return;
    }
  }
}

inline std::size_t Value::Hash() const {
  using internal::HashMix;
  switch (type()) {
    case Type::kNone:
      return 0x6e6f6e65;
    case Type::kBool:
      return std::hash<std::int64_t>()(std::get<bool>(data_) ? 1 : 0);
    case Type::kInt:
      return std::hash<std::int64_t>()(std::get<std::int64_t>(data_));
    case Type::kBigInt:
      return std::hash<std::string>()(std::get<BigIntText>(data_).digits);
    case Type::kFloat: {
      double f = std::get<double>(data_);
      std::int64_t i;
      if (internal::DoubleToInt64(f, &i)) return std::hash<std::int64_t>()(i);
      if (std::isnan(f)) return 0x6e616e;
      if (f == std::floor(f)) return std::hash<std::string>()(internal::IntegralDoubleText(f));
      return std::hash<double>()(f);
    }
    case Type::kString:
      return std::hash<std::string>()(std::get<std::string>(data_));
    case Type::kList: {
      std::size_t h = 0x6c697374;
      for (const Value& v : std::get<List>(data_)) h = HashMix(h, v.Hash());
      return h;
    }
    case Type::kObject: {
      std::size_t h = 0x6f626a;  // order-insensitive, like dict equality
      for (const Member& m : std::get<Object>(data_)) {
        h += HashMix(std::hash<std::string>()(m.first), m.second.Hash());
      }
      return h;
    }
  }
  return 0;
}

inline bool Value::Equals(const Value& other) const {
  Type a = type(), b = other.type();
  const auto numeric = [](Type t) {
    return t == Type::kBool || t == Type::kInt || t == Type::kFloat || t == Type::kBigInt;
  };
  if (a != b && numeric(a) && numeric(b)) {
    // Python compares bool, int and float by exact numeric value.
    const auto as_i64 = [](const Value& v, std::int64_t* out) {
      if (v.type() == Type::kBool) return *out = v.as_bool() ? 1 : 0, true;
      if (v.type() == Type::kInt) return *out = v.as_int(), true;
      if (v.type() == Type::kFloat) return internal::DoubleToInt64(v.as_float(), out);
      return false;
    };
    std::int64_t x, y;
    bool fx = as_i64(*this, &x), fy = as_i64(other, &y);
    if (fx && fy) return x == y;
    if (fx || fy) return false;
    // Remaining pairs: a big int against a float.
    const Value& big = a == Type::kBigInt ? *this : other;
    const Value& flt = a == Type::kBigInt ? other : *this;
    if (flt.type() != Type::kFloat) return false;
    double f = flt.as_float();
    return std::isfinite(f) && f == std::floor(f) &&
           internal::IntegralDoubleText(f) == big.int_text();
  }
  if (a != b) return false;
  switch (a) {
    case Type::kNone:
      return true;
    case Type::kBool:
      return as_bool() == other.as_bool();
    case Type::kInt:
      return as_int() == other.as_int();
    case Type::kBigInt:
      return int_text() == other.int_text();
    case Type::kFloat: {
      double x = as_float(), y = other.as_float();
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    case Type::kString:
      return as_string() == other.as_string();
    case Type::kList:
      return as_list() == other.as_list();
    case Type::kObject: {
      const Object& xs = as_object();
      if (xs.size() != other.as_object().size()) return false;
      for (const Member& m : xs) {
        const Value* v = other.Find(m.first);
        if (v == nullptr || *v != m.second) return false;
      }
      return true;
    }
  }
  return false;
}

inline bool Value::IdenticalTo(const Value& other) const {
  if (type() != other.type()) return false;
  switch (type()) {
    case Type::kString:  // dict keys: the common case when Flatten matches a spec
      return *std::get_if<std::string>(&data_) == *std::get_if<std::string>(&other.data_);
    case Type::kInt:
      return *std::get_if<std::int64_t>(&data_) == *std::get_if<std::int64_t>(&other.data_);
    case Type::kFloat: {
      double x = as_float(), y = other.as_float();
      return (x == y && std::signbit(x) == std::signbit(y)) || (std::isnan(x) && std::isnan(y));
    }
    case Type::kList: {
      const List& xs = as_list();
      const List& ys = other.as_list();
      if (xs.size() != ys.size()) return false;
      for (std::size_t k = 0; k < xs.size(); ++k) {
        if (!xs[k].IdenticalTo(ys[k])) return false;
      }
      return true;
    }
    case Type::kObject: {
      const Object& xs = as_object();
      const Object& ys = other.as_object();
      if (xs.size() != ys.size()) return false;
      for (std::size_t k = 0; k < xs.size(); ++k) {
        if (xs[k].first != ys[k].first || !xs[k].second.IdenticalTo(ys[k].second)) return false;
      }
      return true;
    }
    default:
      return *this == other;
  }
}

}  // namespace cpytree

template <>
struct std::hash<cpytree::Value> {
  std::size_t operator()(const cpytree::Value& v) const { return v.Hash(); }
};

#endif  // CPYTREE_VALUE_H_
