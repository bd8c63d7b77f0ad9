// The plain protocol-1 reader (deserialize_plain.h). What it takes, in
// JSON whitespace of any amount between tokens:
//
//   [1, NODE]
//   NODE = {"type": null, "context": null, "children_spec": []}            a leaf
//        | {"type": "NAME", "context": CONTEXT, "children_spec": [NODE, ...]}
//
// with the keys in this order, each once; NAME a registered serialized type
// name whose node kind is tuple, list, dict or OrderedDict with no
// from_dumpable_context hook; CONTEXT "null" for tuple and list, and for
// dict kinds "[\"KEY\", ...]" (one key per child). Every string here is
// printable ASCII with no escape other than the \" of the context's keys,
// so each key is its bytes. This is treespec_dumps' output for such trees
// (json.dumps's default separators), and json.loads reads it the same:
// the general path (deserialize.cc) builds the same nodes and items for it.
// Anything else (numbers other than the protocol's 1, other escapes,
// non-ASCII bytes, other kinds, a count of keys that is not the arity,
// nodes nested over 500 deep) is declined; up to then only the registry's
// dicts were read (str keys: no user code runs).
#include "spec_model/deserialize_plain.h"

#include <cstdint>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "base/ft.h"
#include "ground/arena.h"
#include "ground/intern.h"
#include "spec_model/serialize.h"
#include "spec_model/spec_model.h"

namespace cpytree {
namespace {

// A leaf as treespec_dumps writes it: matched whole before the tokenizer.
constexpr std::string_view kLeafText = R"({"type": null, "context": null, "children_spec": []})";

class PlainReader {
 public:
  PlainReader(std::string_view text, TraversalArena* b)
      : p_(text.data()), end_(text.data() + text.size()), b_(b) {}

  // Reads the whole document into the arena.
  PlainLoad Document() {
    if (!(Ws(), Eat('[')) || !(Ws(), Eat('1')) || !(Ws(), Eat(','))) return kDeclined;
    Ws();
    PlainLoad o = Open();
    while (o == PlainLoad::kOk && !frames_.empty()) {
      Frame& f = frames_.back();
      Ws();
      if (Eat(']')) {
        if (!(Ws(), Eat('}'))) return kDeclined;
        if (f.keys >= 0 && f.keys != static_cast<std::int64_t>(f.arity)) return kDeclined;
        Node n = internal::MakeNode(f.kind, f.arity, f.ctx, f.leaves, f.count);
        frames_.pop_back();
        b_->nodes.push_back(n);
        AddToParent(n.num_leaves, n.num_nodes);
        continue;
      }
      if (f.arity > 0 && !Eat(',')) return kDeclined;
      if (f.arity == UINT32_MAX) return kDeclined;
      ++f.arity;
      Ws();
      o = Open();  // may grow frames_: f is not used after
    }
    if (o != PlainLoad::kOk) return o;
    return (Ws(), Eat(']')) && (Ws(), p_ == end_) ? PlainLoad::kOk : kDeclined;
  }

 private:
  static constexpr PlainLoad kDeclined = PlainLoad::kDeclined;
  static constexpr std::size_t kMaxFrames = 500;

  struct Frame {
    NodeKind kind;
    std::uint32_t arity;
    std::uint32_t ctx;
    std::int64_t keys;  // dict kinds: the context's key count; -1 otherwise
    std::int64_t leaves;
    std::int64_t count;
  };

  // A serialized type name resolved once per call (kind kLeaf: declined).
  struct TypeName {
    std::string_view name;  // points into the text
    NodeKind kind;
  };

  __attribute__((always_inline)) void Ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool Eat(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  // Inline: with the literal's size known, memcmp is a few compares.
  __attribute__((always_inline)) bool Eat(std::string_view s) {
    if (static_cast<std::size_t>(end_ - p_) < s.size() || std::memcmp(p_, s.data(), s.size()) != 0)
      return false;
    p_ += s.size();
    return true;
  }
  // `"key":` with whitespace around the colon (and before the key).
  bool Key(std::string_view quoted) {
    return (Ws(), Eat(quoted)) && (Ws(), Eat(':')) && (Ws(), true);
  }

  // Printable ASCII other than `"` and `\`: a string's bytes as they are.
  static bool Plain(char c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; }

  // Whether all 8 bytes of w are Plain (bit tricks of "Bit Twiddling
  // Hacks": hasless, hasmore, hasvalue; exact for the any-byte question).
  static bool AllPlain(std::uint64_t w) {
    constexpr std::uint64_t k1 = 0x0101010101010101ull, k80 = 0x8080808080808080ull;
    std::uint64_t below_space = (w - k1 * 0x20) & ~w;
    std::uint64_t above_tilde = (w + k1 * (127 - 0x7E)) | w;
    std::uint64_t q = w ^ (k1 * '"'), b = w ^ (k1 * '\\');
    std::uint64_t quote = (q - k1) & ~q, backslash = (b - k1) & ~b;
    return ((below_space | above_tilde | quote | backslash) & k80) == 0;
  }

  // A JSON string of plain bytes, `"` already eaten; its content up to the
  // closing `close` (`"`, or `\"` inside the context string). Eight bytes a
  // step: keys of a state dict are ~20 bytes, and most of the text.
  bool PlainUntil(std::string_view close, std::string_view* out) {
    const char* start = p_;
    std::uint64_t w;
    while (end_ - p_ >= 8 && (std::memcpy(&w, p_, 8), AllPlain(w))) p_ += 8;
    while (p_ < end_ && Plain(*p_)) ++p_;
    *out = std::string_view(start, static_cast<std::size_t>(p_ - start));
    return Eat(close);
  }

  void AddToParent(std::int64_t leaves, std::int64_t count) {
    if (frames_.empty()) return;
    frames_.back().leaves += leaves;
    frames_.back().count += count;
  }

  void AddLeaf() {
    b_->nodes.push_back(internal::MakeNode(NodeKind::kLeaf, 0, ItemCount(), 1, 1));
    AddToParent(1, 1);
  }

  std::uint32_t ItemCount() const { return static_cast<std::uint32_t>(b_->items.size()); }

  // One node's start: a leaf is finished here, any other node leaves a
  // frame open after its children list's `[`.
  PlainLoad Open() {
    if (Eat(kLeafText)) {
      AddLeaf();
      return PlainLoad::kOk;
    }
    if (!Eat('{') || !Key(R"("type")")) return kDeclined;
    if (Eat("null")) {  // a leaf in other whitespace
      bool leaf = (Ws(), Eat(',')) && Key(R"("context")") && Eat("null") && (Ws(), Eat(',')) &&
                  Key(R"("children_spec")") && Eat('[') && (Ws(), Eat(']')) && (Ws(), Eat('}'));
      if (!leaf) return kDeclined;
      AddLeaf();
      return PlainLoad::kOk;
    }
    std::string_view name;
    if (!Eat('"') || !PlainUntil("\"", &name)) return kDeclined;
    NodeKind kind;
    PlainLoad o = Resolve(name, &kind);
    if (o != PlainLoad::kOk) return o;
    if (!(Ws(), Eat(',')) || !Key(R"("context")")) return kDeclined;
    std::uint32_t ctx = ItemCount();
    std::int64_t keys = -1;
    if (kind == NodeKind::kDict || kind == NodeKind::kOrderedDict) {
      o = Keys(&keys);
      if (o != PlainLoad::kOk) return o;
    } else if (!Eat(R"("null")")) {
      return kDeclined;
    }
    if (!(Ws(), Eat(',')) || !Key(R"("children_spec")") || !Eat('[')) return kDeclined;
    // Deeper text is the general path's: simdjson's DOM stops at 1,024
    // levels of JSON (two per node) and the reference decides there.
    if (frames_.size() == kMaxFrames) return kDeclined;
    frames_.push_back(Frame{kind, 0, ctx, keys, 0, 1});
    return PlainLoad::kOk;
  }

  // A dict kind's context, "[\"KEY\", ...]": appends each key (a str).
  PlainLoad Keys(std::int64_t* count) {
    if (!Eat(R"("[)")) return kDeclined;
    *count = 0;
    while (p_ < end_ && *p_ == ' ') ++p_;  // other whitespace would be escaped here
    if (Eat(R"(]")")) return PlainLoad::kOk;
    while (true) {
      std::string_view key;
      if (!Eat(R"(\")") || !PlainUntil(R"(\")", &key)) return kDeclined;
      PyObject* s = PyUnicode_New(static_cast<Py_ssize_t>(key.size()), 127);
      if (s == nullptr) return PlainLoad::kError;
      std::memcpy(PyUnicode_1BYTE_DATA(s), key.data(), key.size());
      b_->AddItem(s);
      ++*count;
      while (p_ < end_ && *p_ == ' ') ++p_;
      if (Eat(R"(]")")) return PlainLoad::kOk;
      if (!Eat(',')) return kDeclined;
      while (p_ < end_ && *p_ == ' ') ++p_;
    }
  }

  // The node kind of a serialized type name, as the general path's
  // Resolve finds it; kDeclined for a name it would not take here.
  PlainLoad Resolve(std::string_view name, NodeKind* kind) {
    for (const TypeName& t : types_) {
      if (t.name == name) {
        *kind = t.kind;
        return t.kind == NodeKind::kLeaf ? kDeclined : PlainLoad::kOk;
      }
    }
    if (name == "NO_SERIALIZED_TYPE_NAME_FOUND") return kDeclined;
    Ref key(PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size())));
    if (!key) return PlainLoad::kError;
    PyObject* type = nullptr;
    int got = ft::DictGetItemRef(Serial().serialized_type_to_python_type, key.get(), &type);
    if (got <= 0) return got == 0 ? kDeclined : PlainLoad::kError;
    Ref hold(type);
    PyObject* def = nullptr;
    got = ft::DictGetItemRef(Serial().supported_serialized_types, type, &def);
    if (got <= 0) return got == 0 ? kDeclined : PlainLoad::kError;
    Ref def_held(def);
    NodeKind k = NodeKind::kLeaf;  // declined unless a hookless builtin kind below
    if (PyTuple_Check(def) && PyTuple_GET_SIZE(def) == 4 && PyTuple_GET_ITEM(def, 3) == Py_None) {
      k = KindOfType(type);
      if (k != NodeKind::kTuple && k != NodeKind::kList && k != NodeKind::kDict &&
          k != NodeKind::kOrderedDict) {
        k = NodeKind::kLeaf;
      }
    }
    types_.push_back(TypeName{name, k});
    *kind = k;
    return k == NodeKind::kLeaf ? kDeclined : PlainLoad::kOk;
  }

  const char* p_;
  const char* end_;
  TraversalArena* b_;
  absl::InlinedVector<Frame, 16> frames_;
  absl::InlinedVector<TypeName, 8> types_;
};

}  // namespace

PlainLoad LoadsPlain(std::string_view text, PyObject** result) {
  ScratchArena b;  // on a decline its items (keys) are dropped: str, no user code
  PlainReader reader(text, b.get());
  PlainLoad o = reader.Document();
  if (o != PlainLoad::kOk) return o;
  if (b->nodes.size() == 1 && b->nodes[0].kind == NodeKind::kLeaf) {
    Py_INCREF(LeafSpec());
    *result = LeafSpec();
    return PlainLoad::kOk;
  }
  *result = InternArena(b.get());
  return *result != nullptr ? PlainLoad::kOk : PlainLoad::kError;
}

}  // namespace cpytree
