// Tests of cpytree::Value and the CPython-exact text formatting under it:
// repr of str and float, json.dumps escaping, Python == and hash.
#include "cpytree/value.h"

#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>

#include "cpytree/internal/py_format.h"
#include "cpytree/json.h"
#include "gtest/gtest.h"

namespace cpytree {
namespace {

std::string FloatRepr(double v) {
  std::string out;
  internal::AppendPyFloatRepr(&out, v);
  return out;
}

std::string JsonStr(const std::string& s) {
  std::string out;
  internal::AppendJsonString(&out, s);
  return out;
}

TEST(PyFormatTest, FloatReprMatchesPython) {
  // Expected values are Python 3.11's repr().
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(1.5), "1.5");
  EXPECT_EQ(FloatRepr(0.1), "0.1");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(FloatRepr(1.5e16), "1.5e+16");
  EXPECT_EQ(FloatRepr(1e-4), "0.0001");
  EXPECT_EQ(FloatRepr(1e-5), "1e-05");
  EXPECT_EQ(FloatRepr(-0.0), "-0.0");
  EXPECT_EQ(FloatRepr(123.456), "123.456");
  EXPECT_EQ(FloatRepr(5e-324), "5e-324");
  EXPECT_EQ(FloatRepr(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(FloatRepr(1e300), "1e+300");
  EXPECT_EQ(FloatRepr(123456789.125), "123456789.125");
  EXPECT_EQ(FloatRepr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FloatRepr(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(FloatRepr(std::nan("")), "nan");
}

TEST(PyFormatTest, JsonFloatSpellsNonFiniteLikePython) {
  EXPECT_EQ(DumpsValue(Value(std::numeric_limits<double>::infinity())), "Infinity");
  EXPECT_EQ(DumpsValue(Value(-std::numeric_limits<double>::infinity())), "-Infinity");
  EXPECT_EQ(DumpsValue(Value(std::nan(""))), "NaN");
  EXPECT_EQ(DumpsValue(Value(2.5)), "2.5");
}

TEST(PyFormatTest, StrReprQuotingAndEscapes) {
  EXPECT_EQ(Value("a").Repr(), "'a'");
  EXPECT_EQ(Value("it's").Repr(), "\"it's\"");
  EXPECT_EQ(Value("a\"b'c").Repr(), "'a\"b\\'c'");
  EXPECT_EQ(Value("say \"hi\"").Repr(), "'say \"hi\"'");
  EXPECT_EQ(Value("back\\slash").Repr(), "'back\\\\slash'");
  EXPECT_EQ(Value("\t\n\r").Repr(), "'\\t\\n\\r'");
  EXPECT_EQ(Value(std::string("\x01\x1f\x7f", 3)).Repr(), "'\\x01\\x1f\\x7f'");
  EXPECT_EQ(Value(std::string("\0", 1)).Repr(), "'\\x00'");
  // Printable non-ASCII stays; non-printables escape by size.
  EXPECT_EQ(Value("é日本😀").Repr(), "'é日本😀'");
  EXPECT_EQ(Value("\u00a0\u00ad").Repr(), "'\\xa0\\xad'");
  EXPECT_EQ(Value("\u2028\ufeff\u0378").Repr(), "'\\u2028\\ufeff\\u0378'");
  EXPECT_EQ(Value("\U000e0001").Repr(), "'\\U000e0001'");
}

TEST(PyFormatTest, StrReprShowsMalformedUtf8AsByteEscapes) {
  EXPECT_EQ(Value(std::string("a\xff", 2)).Repr(), "'a\\xff'");
}

TEST(PyFormatTest, JsonStringIsAsciiWithSurrogatePairs) {
  EXPECT_EQ(JsonStr("plain"), "\"plain\"");
  EXPECT_EQ(JsonStr("q\"b\\"), "\"q\\\"b\\\\\"");
  EXPECT_EQ(JsonStr("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(JsonStr(std::string("\x01\x7f", 2)), "\"\\u0001\\u007f\"");
  EXPECT_EQ(JsonStr("é"), "\"\\u00e9\"");
  EXPECT_EQ(JsonStr("😀"), "\"\\ud83d\\ude00\"");
  EXPECT_THROW(JsonStr(std::string("\xc3", 1)), Error);
  EXPECT_THROW(JsonStr(std::string("\xed\xa0\x80", 3)), Error);  // an encoded surrogate
}

TEST(PyFormatTest, Utf8DecoderRejectsOverlongsAndRange) {
  EXPECT_TRUE(internal::IsValidUtf8("é日😀"));
  EXPECT_FALSE(internal::IsValidUtf8(std::string("\xc0\xaf", 2)));          // overlong '/'
  EXPECT_FALSE(internal::IsValidUtf8(std::string("\xf4\x90\x80\x80", 4)));  // > U+10FFFF
  EXPECT_FALSE(internal::IsValidUtf8(std::string("\xe6\x97", 2)));          // truncated
}

TEST(PyFormatTest, PrintableTableAgreesWithPythonSamples) {
  EXPECT_TRUE(internal::IsPythonPrintable(' '));
  EXPECT_FALSE(internal::IsPythonPrintable(0x85));
  EXPECT_TRUE(internal::IsPythonPrintable(0xE9));
  EXPECT_FALSE(internal::IsPythonPrintable(0xD800));
  EXPECT_FALSE(internal::IsPythonPrintable(0xE000));  // private use
  EXPECT_TRUE(internal::IsPythonPrintable(0x1F600));
  EXPECT_FALSE(internal::IsPythonPrintable(0x10FFFF));
}

TEST(ValueTest, ReprOfContainers) {
  Value list = Value::MakeList({"weight", 3, nullptr, true, 1.5, Value::MakeList({})});
  EXPECT_EQ(list.Repr(), "['weight', 3, None, True, 1.5, []]");
  Value obj = Value::MakeObject({{"k", false}, {"n", Value::MakeList({1})}});
  EXPECT_EQ(obj.Repr(), "{'k': False, 'n': [1]}");
  EXPECT_EQ(Value::MakeObject({}).Repr(), "{}");
  EXPECT_EQ(Value("s").Str(), "s");
  EXPECT_EQ(list.Str(), list.Repr());
}

TEST(ValueTest, EnumObjectsShowAsMembers) {
  Value e = Value::MakeObject({{"__enum__", true}, {"fqn", "mod:Color"}, {"name", "RED"}});
  EXPECT_EQ(e.Repr(), "<Color.RED>");
}

TEST(ValueTest, BigIntsAreExactAndCanonical) {
  EXPECT_EQ(Value::MakeBigInt("100000000000000000000").Repr(), "100000000000000000000");
  EXPECT_EQ(Value::MakeBigInt("100000000000000000000").type(), Value::Type::kBigInt);
  EXPECT_EQ(Value::MakeBigInt("-5").type(), Value::Type::kInt);
  EXPECT_EQ(Value::MakeBigInt("-0").as_int(), 0);
  EXPECT_EQ(Value(std::numeric_limits<std::uint64_t>::max()).int_text(), "18446744073709551615");
  EXPECT_EQ(Value(std::numeric_limits<std::uint64_t>::max()).type(), Value::Type::kBigInt);
  EXPECT_THROW(Value::MakeBigInt("012"), Error);
  EXPECT_THROW(Value::MakeBigInt("1.5"), Error);
  EXPECT_THROW(Value::MakeBigInt(""), Error);
  EXPECT_THROW(Value::MakeBigInt("-"), Error);
}

TEST(ValueTest, EqualityFollowsPython) {
  EXPECT_EQ(Value(1), Value(1.0));
  EXPECT_EQ(Value(1), Value(true));
  EXPECT_EQ(Value(0.0), Value(false));
  EXPECT_NE(Value(1), Value("1"));
  EXPECT_NE(Value(nullptr), Value(0));
  EXPECT_NE(Value(1.5), Value(1));
  EXPECT_EQ(Value::MakeBigInt("1180591620717411303424"), Value(1180591620717411303424.0));
  EXPECT_NE(Value::MakeBigInt("1180591620717411303425"), Value(1180591620717411303424.0));
  EXPECT_EQ(Value(std::nan("")), Value(std::nan("")));  // so a spec equals itself
  EXPECT_EQ(Value::MakeList({1, "a"}), Value::MakeList({1.0, "a"}));
  EXPECT_NE(Value::MakeList({1}), Value::MakeList({1, 2}));
  // Objects compare like dicts: member order does not matter.
  EXPECT_EQ(Value::MakeObject({{"a", 1}, {"b", 2}}), Value::MakeObject({{"b", 2}, {"a", 1}}));
  EXPECT_NE(Value::MakeObject({{"a", 1}}), Value::MakeObject({{"a", 2}}));
}

TEST(ValueTest, IdenticalToDistinguishesTypes) {
  EXPECT_FALSE(Value(1).IdenticalTo(Value(1.0)));
  EXPECT_FALSE(Value(0.0).IdenticalTo(Value(-0.0)));
  EXPECT_TRUE(Value::MakeList({1, "a"}).IdenticalTo(Value::MakeList({1, "a"})));
  EXPECT_FALSE(Value::MakeObject({{"a", 1}, {"b", 2}})
                   .IdenticalTo(Value::MakeObject({{"b", 2}, {"a", 1}})));
}

TEST(ValueTest, HashAgreesWithEquality) {
  std::hash<Value> h;
  EXPECT_EQ(h(Value(1)), h(Value(1.0)));
  EXPECT_EQ(h(Value(1)), h(Value(true)));
  EXPECT_EQ(h(Value::MakeBigInt("1180591620717411303424")), h(Value(1180591620717411303424.0)));
  EXPECT_EQ(h(Value::MakeObject({{"a", 1}, {"b", 2}})),
            h(Value::MakeObject({{"b", 2}, {"a", 1.0}})));
  std::unordered_set<Value> set = {Value("a"), Value(1), Value(nullptr)};
  EXPECT_EQ(set.count(Value(1.0)), 1u);
  EXPECT_EQ(set.count(Value("b")), 0u);
}

TEST(ValueTest, AccessorsThrowOnWrongType) {
  EXPECT_THROW(Value(1).as_string(), Error);
  EXPECT_THROW(Value("a").as_int(), Error);
  EXPECT_THROW(Value(1).Find("k"), Error);
  EXPECT_EQ(Value::MakeObject({{"k", 2}}).Find("k")->as_int(), 2);
  EXPECT_EQ(Value::MakeObject({{"k", 2}}).Find("x"), nullptr);
}

TEST(ValueTest, ConstructorsPickTheIntendedType) {
  EXPECT_TRUE(Value("text").is_string());  // not bool
  EXPECT_TRUE(Value(true).is_bool());
  EXPECT_TRUE(Value(std::int8_t{3}).is_int());
  EXPECT_TRUE(Value(3.f).is_float());
  EXPECT_TRUE(Value().is_none());
}

TEST(ValueTest, JsonRoundTripKeepsOrderDuplicatesAndBigInts) {
  Value v = LoadsValue(R"({"b": 1, "a": [1.5, 100000000000000000000, -7], "b": 2})");
  EXPECT_EQ(DumpsValue(v), R"({"b": 2, "a": [1.5, 100000000000000000000, -7]})");
  EXPECT_EQ(DumpsValue(LoadsValue("1E5")), "100000.0");  // Python: float 100000.0
  EXPECT_EQ(DumpsValue(LoadsValue("-0")), "0");
  EXPECT_EQ(DumpsValue(LoadsValue("\"\\u00e9\"")), "\"\\u00e9\"");
}

TEST(ValueTest, JsonObjectsWithManyRepeatedKeys) {
  std::string text = "{";
  for (int i = 0; i < 40; ++i) text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  text += "\"k3\": 99}";
  Value v = LoadsValue(text);
  EXPECT_EQ(v.as_object().size(), 40u);
  EXPECT_EQ(v.as_object()[3].second.as_int(), 99);
}

}  // namespace
}  // namespace cpytree
