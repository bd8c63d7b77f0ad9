// Tests of protocol-1 JSON: exact bytes for every node kind, round trips, and
// a corpus of malformed input that must throw ParseError (never crash).
#include "cpytree/json.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cpytree {
namespace {

TreeSpec L() { return TreeSpec::Leaf(); }

constexpr const char* kLeafJson = R"({"type": null, "context": null, "children_spec": []})";

std::string Wrap(const std::string& schema) { return "[1, " + schema + "]"; }

std::string Node(const std::string& type, const std::string& context,
                 const std::vector<std::string>& children) {
  std::string out = "{\"type\": " + type + ", \"context\": " + context + ", \"children_spec\": [";
  for (std::size_t k = 0; k < children.size(); ++k) out += (k ? ", " : "") + children[k];
  return out + "]}";
}

// Every expected string below is what torch 2.13's treespec_dumps writes.
#if defined(CPYTREE_EXPECTED_SIMDJSON)
// What Loads accepts must not depend on the simdjson a machine has: the tests
// compile against the pinned one (cmake/deps.lock, as the wheels link it).
TEST(JsonTest, BuiltWithThePinnedSimdjson) {
  EXPECT_STREQ(SIMDJSON_VERSION, CPYTREE_EXPECTED_SIMDJSON);
}
#endif

TEST(JsonTest, DumpsLeaf) { EXPECT_EQ(Dumps(L()), Wrap(kLeafJson)); }

TEST(JsonTest, DumpsEveryBuiltinKind) {
  EXPECT_EQ(Dumps(TreeSpec::Tuple({L()})),
            Wrap(Node("\"builtins.tuple\"", "\"null\"", {kLeafJson})));
  EXPECT_EQ(Dumps(TreeSpec::List({})), Wrap(Node("\"builtins.list\"", "\"null\"", {})));
  EXPECT_EQ(Dumps(TreeSpec::Dict({"a", 3}, {L(), L()})),
            Wrap(Node("\"builtins.dict\"", R"("[\"a\", 3]")", {kLeafJson, kLeafJson})));
  EXPECT_EQ(Dumps(TreeSpec::NamedTuple("__main__.P", {L()})),
            Wrap(Node("\"collections.namedtuple\"", "\"__main__.P\"", {kLeafJson})));
  EXPECT_EQ(Dumps(TreeSpec::OrderedDict({"b"}, {L()})),
            Wrap(Node("\"collections.OrderedDict\"", R"("[\"b\"]")", {kLeafJson})));
  EXPECT_EQ(Dumps(TreeSpec::DefaultDict({"builtins", "list"}, {"k"}, {L()})),
            Wrap(Node("\"collections.defaultdict\"",
                      R"({"default_factory_module": "builtins", "default_factory_name": "list", )"
                      R"("dict_context": ["k"]})",
                      {kLeafJson})));
  EXPECT_EQ(Dumps(TreeSpec::Deque(3, {L()})),
            Wrap(Node("\"collections.deque\"", "\"3\"", {kLeafJson})));
  EXPECT_EQ(Dumps(TreeSpec::Deque(std::nullopt, {})),
            Wrap(Node("\"collections.deque\"", "\"null\"", {})));
  EXPECT_EQ(Dumps(TreeSpec::Custom("m.Pair", "[\"t\", 1]", {L()})),
            Wrap(Node("\"m.Pair\"", R"("[\"t\", 1]")", {kLeafJson})));
  EXPECT_EQ(Dumps(TreeSpec::Custom("m.Box", Value::MakeObject({{"n", 2}, {"f", 0.5}}), {})),
            Wrap(Node("\"m.Box\"", R"({"n": 2, "f": 0.5})", {})));
}

TEST(JsonTest, KeysAreEncodedTwiceLikePython) {
  TreeSpec s = TreeSpec::Dict({"é\n'\"", 1.5, true, nullptr, Value::MakeBigInt("100000000000000000000"),
                               "😀"},
                              {L(), L(), L(), L(), L(), L()});
  std::string ctx =
      R"("[\"\\u00e9\\n'\\\"\", 1.5, true, null, 100000000000000000000, \"\\ud83d\\ude00\"]")";
  EXPECT_EQ(Dumps(s), Wrap(Node("\"builtins.dict\"", ctx,
                                {kLeafJson, kLeafJson, kLeafJson, kLeafJson, kLeafJson, kLeafJson})));
  EXPECT_EQ(Loads(Dumps(s)), s);
}

TEST(JsonTest, RoundTripsEveryKindAndNesting) {
  std::vector<TreeSpec> specs = {
      L(),
      TreeSpec::Tuple({}),
      TreeSpec::Dict({}, {}),
      TreeSpec::Tuple({TreeSpec::List({L(), TreeSpec::Dict({"x"}, {L()})}), L()}),
      TreeSpec::NamedTuple("m.P", {L(), TreeSpec::Tuple({L()})}),
      TreeSpec::OrderedDict({"z", "a"}, {L(), TreeSpec::List({})}),
      TreeSpec::DefaultDict({"collections", "OrderedDict"}, {1, -2}, {L(), L()}),
      TreeSpec::Deque(0, {}),
      TreeSpec::Deque(7, {L(), TreeSpec::Deque(std::nullopt, {L()})}),
      TreeSpec::Custom("a.b.C", "null", {L(), TreeSpec::Custom("D", Value::MakeList({1}), {})}),
      TreeSpec::Dict({Value::MakeList({1, "a"}), 0.1, -0.0, 1e16}, {L(), L(), L(), L()}),
  };
  for (const TreeSpec& s : specs) {
    std::string text = Dumps(s);
    TreeSpec back = Loads(text);
    EXPECT_EQ(back, s) << text;
    EXPECT_EQ(Dumps(back), text);
    EXPECT_EQ(back.ToString(), s.ToString());
    EXPECT_EQ(back.num_nodes(), s.num_nodes());
    EXPECT_EQ(back.num_leaves(), s.num_leaves());
  }
}

TEST(JsonTest, DumpsOfASubtree) {
  TreeSpec s = TreeSpec::Tuple({TreeSpec::Dict({"k"}, {L()}), L()});
  EXPECT_EQ(Dumps(s.child(0)), Dumps(TreeSpec::Dict({"k"}, {L()})));
}

TEST(JsonTest, UnknownProtocolOnDumps) { EXPECT_THROW(Dumps(L(), 2), Error); }

TEST(JsonTest, LoadsIgnoresExtraMembersAndMemberOrderLikeTorch) {
  TreeSpec s = Loads(R"([1, {"children_spec": [], "extra": 5, "context": "null", "type": "builtins.list"}])");
  EXPECT_EQ(s, TreeSpec::List({}));
}

TEST(JsonTest, LoadsAcceptsWhitespaceAndCompactSeparators) {
  EXPECT_EQ(Loads("[1,{\"type\":null,\"context\":null,\"children_spec\":[]}]"), L());
  EXPECT_EQ(Loads(" \n[ 1 , {\"type\" : \"builtins.dict\", \"context\": \"[\\\"a\\\"]\",\n"
                  " \"children_spec\": [{\"type\":null,\"context\":null,\"children_spec\":[]}]} ] "),
            TreeSpec::Dict({"a"}, {L()}));
}

TEST(JsonTest, DeepButBoundedNestingLoads) {
  TreeSpec s = L();
  for (int i = 0; i < 1000; ++i) s = TreeSpec::List({s});
  std::string text = Dumps(s);
  TreeSpec back = Loads(text);
  EXPECT_EQ(back.num_nodes(), 1001);
  EXPECT_EQ(back, s);
}

// ---- Malformed input --------------------------------------------------------

struct BadCase {
  const char* name;
  std::string text;
  const char* message_part;  // expected substring of what()
};

std::string Leaf() { return kLeafJson; }

std::vector<BadCase> Corpus() {
  std::string deep_array(100000, '[');
  std::string deep_spec;
  for (int i = 0; i < 2100; ++i) deep_spec += R"({"type": "builtins.list", "context": "null", "children_spec": [)";
  return {
      {"empty", "", "invalid JSON"},
      {"whitespace", "  ", "invalid JSON"},
      {"truncated_array", "[1, ", "invalid JSON"},
      {"truncated_object", "[1, {\"type\": null", "invalid JSON"},
      {"truncated_string", "[1, {\"type\": \"builtins.li", "invalid JSON"},
      {"truncated_literal", "[1, {\"type\": nul", "invalid JSON"},
      {"trailing_garbage", Wrap(Leaf()) + " x", "invalid JSON"},
      // json.loads rejects a byte-order mark; simdjson >= 3.6 and nlohmann skip it.
      {"utf8_bom", "\xEF\xBB\xBF" + Wrap(Leaf()), "Unexpected UTF-8 BOM"},
      {"utf8_bom_in_context",
       Wrap(Node("\"builtins.dict\"", "\"\xEF\xBB\xBF[\\\"a\\\"]\"", {Leaf()})),
       "Unexpected UTF-8 BOM"},
      {"two_documents", Wrap(Leaf()) + Wrap(Leaf()), "invalid JSON"},
      {"single_quotes", "[1, {'type': null}]", "invalid JSON"},
      {"trailing_comma", "[1, " + Leaf() + ",]", "invalid JSON"},
      {"invalid_utf8", "[1, {\"type\": \"\xff\", \"context\": null, \"children_spec\": []}]",
       "invalid JSON"},
      {"lone_surrogate", Wrap(Node("\"builtins.dict\"", R"("[\"\\ud800\"]")", {Leaf()})),
       "not valid JSON text"},
      {"nan_key", Wrap(Node("\"builtins.dict\"", R"("[NaN]")", {Leaf()})), "not valid JSON text"},
      {"huge_float", "[1e400, " + Leaf() + "]", "overflow"},
      {"huge_int_protocol", "[100000000000000000000000, " + Leaf() + "]", "Unknown protocol"},
      {"huge_int_key", Wrap(Node("\"builtins.dict\"", "\"[1" + std::string(400, '0') + "]\"", {Leaf()})),
       "not valid JSON text"},
      {"deep_arrays", deep_array, "nested deeper"},
      {"deep_specs", "[1, " + deep_spec, "nested deeper"},
      {"not_a_list", "{}", "must be a JSON list"},
      {"scalar", "1", "must be a JSON list"},
      {"short_list", "[1]", "must be a JSON list"},
      {"long_list", "[1, " + Leaf() + ", 3]", "must be a JSON list"},
      {"protocol_2", "[2, " + Leaf() + "]", "Unknown protocol 2"},
      {"protocol_str", "[\"1\", " + Leaf() + "]", "Unknown protocol"},
      {"protocol_bool", "[true, " + Leaf() + "]", "Unknown protocol"},
      {"protocol_float", "[1.0, " + Leaf() + "]", "Unknown protocol"},
      {"node_not_object", "[1, 5]", "must be a JSON object"},
      {"node_is_list", "[1, []]", "must be a JSON object"},
      {"missing_type", R"([1, {"context": null, "children_spec": []}])", "\"type\""},
      {"missing_context", R"([1, {"type": null, "children_spec": []}])", "\"context\""},
      {"missing_children", R"([1, {"type": null, "context": null}])", "\"children_spec\""},
      {"type_is_int", Wrap(Node("5", "null", {})), "\"type\" must be a string"},
      {"type_is_empty", Wrap(Node("\"\"", "null", {})), "must not be empty"},
      {"children_not_list", R"([1, {"type": null, "context": null, "children_spec": {}}])",
       "must be a list"},
      {"child_not_object", Wrap(Node("\"builtins.list\"", "\"null\"", {"3"})),
       "must be a JSON object"},
      {"leaf_with_context", Wrap(Node("null", "\"null\"", {})), "leaf"},
      {"leaf_with_children", Wrap(Node("null", "null", {Leaf()})), "leaf"},
      {"tuple_context_not_null", Wrap(Node("\"builtins.tuple\"", "\"[1]\"", {})), "must be \"null\""},
      {"tuple_context_raw_null", Wrap(Node("\"builtins.tuple\"", "null", {})), "string of JSON"},
      {"dict_context_not_string", Wrap(Node("\"builtins.dict\"", "[\"a\"]", {Leaf()})),
       "string of JSON"},
      {"dict_context_bad_json", Wrap(Node("\"builtins.dict\"", R"("[\"a\"")", {Leaf()})),
       "not valid JSON text"},
      {"dict_context_not_list", Wrap(Node("\"builtins.dict\"", R"("{}")", {Leaf()})),
       "must be a JSON list"},
      {"dict_too_few_keys", Wrap(Node("\"builtins.dict\"", R"("[\"a\"]")", {Leaf(), Leaf()})),
       "1 keys but 2 children"},
      {"dict_too_many_keys", Wrap(Node("\"collections.OrderedDict\"", R"("[1, 2]")", {Leaf()})),
       "2 keys but 1 children"},
      {"defaultdict_context_string",
       Wrap(Node("\"collections.defaultdict\"", "\"null\"", {})), "default_factory_module"},
      {"defaultdict_missing_key",
       Wrap(Node("\"collections.defaultdict\"",
                 R"({"default_factory_module": "builtins", "default_factory_name": "list", "x": []})",
                 {})),
       "default_factory_module"},
      {"defaultdict_factory_not_str",
       Wrap(Node("\"collections.defaultdict\"",
                 R"({"default_factory_module": 1, "default_factory_name": "list", "dict_context": []})",
                 {})),
       "must be strings"},
      {"defaultdict_wrong_count",
       Wrap(Node("\"collections.defaultdict\"",
                 R"({"default_factory_module": "builtins", "default_factory_name": "list", "dict_context": []})",
                 {Leaf()})),
       "0 keys but 1 children"},
      {"namedtuple_context_not_str", Wrap(Node("\"collections.namedtuple\"", "null", {})),
       "serialized name"},
      {"deque_negative", Wrap(Node("\"collections.deque\"", "\"-1\"", {})), "maxlen"},
      {"deque_float", Wrap(Node("\"collections.deque\"", "\"1.5\"", {})), "maxlen"},
      {"deque_str", Wrap(Node("\"collections.deque\"", R"("\"3\"")", {})), "maxlen"},
  };
}

TEST(JsonMalformedTest, EveryCaseThrowsParseError) {
  for (const BadCase& c : Corpus()) {
    try {
      Loads(c.text);
      ADD_FAILURE() << c.name << ": no exception";
    } catch (const ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos)
          << c.name << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": not a ParseError: " << e.what();
    }
  }
}

TEST(JsonMalformedTest, EveryPrefixOfAValidSpecThrows) {
  std::string text = Dumps(TreeSpec::Tuple({TreeSpec::Dict({"a", 1.5}, {L(), TreeSpec::Deque(2, {L()})}),
                                            TreeSpec::Custom("m.C", Value::MakeObject({{"k", 1}}), {})}));
  for (std::size_t n = 0; n < text.size(); ++n) {
    EXPECT_THROW(Loads(text.substr(0, n)), ParseError) << n;
  }
  EXPECT_NO_THROW(Loads(text));
}

TEST(JsonMalformedTest, RandomMutationsThrowOurErrorsOrLoad) {
  // A small deterministic fuzz: flip, insert and delete bytes of a valid spec.
  // Every outcome must be a spec that dumps again, or a ParseError.
  const std::string valid = Dumps(TreeSpec::Tuple(
      {TreeSpec::Dict({"a", 1.5, Value::MakeBigInt("100000000000000000000")},
                      {L(), TreeSpec::Deque(2, {L()}), TreeSpec::List({})}),
       TreeSpec::DefaultDict({"builtins", "list"}, {"k"}, {L()}),
       TreeSpec::NamedTuple("m.P", {L()}),
       TreeSpec::Custom("m.C", Value::MakeObject({{"k", Value::MakeList({1, "é"})}}), {L()})}));
  const std::string alphabet = "[]{}\",:\\0123456789.eE-+ntrufalsNI\x01\xff";
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&state](std::uint64_t n) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<std::size_t>(state % n);
  };
  int loaded = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = valid;
    for (int edits = 1 + static_cast<int>(next(3)); edits > 0; --edits) {
      std::size_t pos = next(text.size());
      char c = alphabet[next(alphabet.size())];
      switch (next(3)) {
        case 0: text[pos] = c; break;
        case 1: text.insert(pos, 1, c); break;
        default: text.erase(pos, 1 + next(8)); break;
      }
    }
    try {
      TreeSpec s = Loads(text);
      EXPECT_EQ(Loads(Dumps(s)), s);
      ++loaded;
    } catch (const ParseError&) {
    }
  }
  EXPECT_GT(loaded, 0);  // some mutations (e.g. in key text) stay valid
}

TEST(JsonMalformedTest, SyntaxErrorsReportTheByte) {
  try {
    Loads("[1, x]");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.byte(), 4u);
    EXPECT_TRUE(e.path().empty());
  }
}

TEST(JsonMalformedTest, SemanticErrorsReportTheJsonPath) {
  std::string bad = Wrap(Node("\"builtins.tuple\"", "\"null\"",
                              {Leaf(), Node("\"builtins.dict\"", R"("[\"a\"]")", {})}));
  try {
    Loads(bad);
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.path(), "$[1].children_spec[1].context");
    EXPECT_EQ(e.byte(), ParseError::kNoPosition);
  }
}

}  // namespace
}  // namespace cpytree
