// A structure-aware libFuzzer mutator for the targets that read JSON.
//
// A byte mutator rarely turns a JSON string into an object or moves a field
// to where another type is expected; those are the inputs that found this
// product's worst defect class (a field of the wrong JSON type reaching a
// worker thread). Each mutation parses the input, changes its tree, and
// serializes it back:
//   - a value replaced by one of another type (string, number, bool, null,
//     object, array);
//   - a key (or an array element) deleted;
//   - a member copied into another object of the document (a sibling or any
//     other: a field where it does not belong);
//   - a value wrapped in deep nesting (past the parsers' depth limits);
//   - two subtrees swapped, within an input or between two (crossover);
//   - a string's or a number's text mutated by libFuzzer's byte mutator.
// An input that is not JSON is left to libFuzzer's byte mutator.
//
// Linked into each JSON target; defines LLVMFuzzerCustomMutator and
// LLVMFuzzerCustomCrossOver.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using nlohmann::json;
using Rng = std::mt19937;

// Depth of the documents the mutator builds; deeper than kMaxJsonDepth (128)
// of the AdmissionReview parser, so the refusal is exercised too.
constexpr int kMaxWrapDepth = 160;

size_t Pick(Rng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

struct Node {
  json* value;
  json* parent;  // null for the root
};

void Collect(json& value, json* parent, std::vector<Node>& out) {
  out.push_back({&value, parent});
  if (value.is_structured()) {
    for (json& child : value) Collect(child, &value, out);
  }
}

std::vector<Node> Nodes(json& root) {
  std::vector<Node> nodes;
  Collect(root, nullptr, nodes);
  return nodes;
}

std::vector<std::string> KeysOf(const json& value) {
  std::vector<std::string> keys;
  for (auto it = value.begin(); it != value.end(); ++it) keys.push_back(it.key());
  return keys;
}

// value's JSON text; strings that are not UTF-8 (from byte mutations) are
// repaired, as nlohmann refuses to write them.
std::string Text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Runs libFuzzer's byte mutator over text.
std::string MutateBytes(const std::string& text) {
  std::string buf = text;
  const size_t max = buf.size() * 2 + 16;
  buf.resize(max);
  size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(buf.data()), text.size(), max);
  buf.resize(n);
  return buf;
}

json NumberLike(Rng& rng, const json& old) {
  switch (Pick(rng, 8)) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return std::numeric_limits<int64_t>::max();
    case 3:
      return std::numeric_limits<int64_t>::min();
    case 4:
      return std::numeric_limits<uint64_t>::max();
    case 5:
      return 1e308;
    case 6:
      return 0.5;
    default: {
      // The old value's text (a quantity "512Mi" keeps its digits), mutated.
      std::string text = old.is_string() ? old.get<std::string>() : Text(old);
      json parsed = json::parse(MutateBytes(text), nullptr, false);
      return parsed.is_number() ? parsed : json(static_cast<int64_t>(rng()));
    }
  }
}

// A value of another type than old.
json OtherType(Rng& rng, const json& old) {
  for (;;) {
    json v;
    switch (Pick(rng, 9)) {
      case 0:
        v = old.is_string() ? old.get<std::string>() + "x" : Text(old);
        break;
      case 1:
        v = NumberLike(rng, old);
        break;
      case 2:
        v = (rng() & 1) != 0;
        break;
      case 3:
        v = nullptr;
        break;
      case 4:
        v = json::object();
        break;
      case 5:
        v = json::array();
        break;
      case 6:
        v = json::array({old});
        break;  // a list where one was expected
      case 7:
        v = json{{"value", old}};
        break;  // an object around it
      default:
        v = "";
        break;
    }
    if (v.type() != old.type() || old.is_structured()) return v;
  }
}

bool IsAncestor(const json* maybe_ancestor, const json* node) {
  if (!maybe_ancestor->is_structured()) return false;
  for (const json& child : *maybe_ancestor) {
    if (&child == node || IsAncestor(&child, node)) return true;
  }
  return false;
}

// One structural change to root. False when the chosen change did not apply
// (the caller tries another).
bool MutateOnce(json& root, Rng& rng, const json* other) {
  std::vector<Node> nodes = Nodes(root);
  Node n = nodes[Pick(rng, nodes.size())];
  json& v = *n.value;
  switch (Pick(rng, 8)) {
    case 0:  // another type
      v = OtherType(rng, v);
      return true;
    case 1: {  // delete a key or an element
      json* container = v.is_structured() && !v.empty() ? &v : n.parent;
      if (container == nullptr || container->empty()) return false;
      if (container->is_object()) {
        std::vector<std::string> keys = KeysOf(*container);
        container->erase(keys[Pick(rng, keys.size())]);
      } else {
        container->erase(Pick(rng, container->size()));
      }
      return true;
    }
    case 2: {  // copy a member into another object (a sibling, or anywhere)
      if (!v.is_object() || v.empty()) return false;
      std::vector<std::string> keys = KeysOf(v);
      const std::string key = keys[Pick(rng, keys.size())];
      json copy = v[key];
      std::vector<json*> objects;
      if (n.parent != nullptr && (rng() & 1) != 0) {
        for (json& sibling : *n.parent) {
          if (sibling.is_object() && &sibling != &v) objects.push_back(&sibling);
        }
      }
      if (objects.empty()) {
        for (const Node& m : nodes) {
          if (m.value->is_object() && m.value != &v && !IsAncestor(&v, m.value)) {
            objects.push_back(m.value);
          }
        }
      }
      if (objects.empty()) {
        v[key + "_"] = std::move(copy);  // the same object under another name
      } else {
        (*objects[Pick(rng, objects.size())])[key] = std::move(copy);
      }
      return true;
    }
    case 3: {  // deep nesting
      int depth = 1 + static_cast<int>(Pick(rng, kMaxWrapDepth));
      json wrapped = std::move(v);
      const bool arrays = (rng() & 1) != 0;
      for (int i = 0; i < depth; ++i) {
        wrapped = arrays ? json::array({std::move(wrapped)}) : json{{"a", std::move(wrapped)}};
      }
      v = std::move(wrapped);
      return true;
    }
    case 4: {  // swap two subtrees
      Node m = nodes[Pick(rng, nodes.size())];
      if (m.value == n.value || IsAncestor(n.value, m.value) || IsAncestor(m.value, n.value)) {
        return false;
      }
      std::swap(*n.value, *m.value);
      return true;
    }
    case 5: {  // a subtree of the other input
      if (other == nullptr) return false;
      json copy = *other;
      std::vector<Node> theirs = Nodes(copy);
      v = *theirs[Pick(rng, theirs.size())].value;
      return true;
    }
    case 6:  // mutate a string's or a number's text
      if (v.is_string()) {
        v = MutateBytes(v.get<std::string>());
        return true;
      }
      if (v.is_number()) {
        v = NumberLike(rng, v);
        return true;
      }
      return false;
    default: {  // add a key of the document to an object, or an element to an array
      if (v.is_array()) {
        v.push_back(v.empty() ? json(nullptr) : v[Pick(rng, v.size())]);
        return true;
      }
      if (!v.is_object()) return false;
      std::vector<std::string> keys;
      for (const Node& m : nodes) {
        if (m.value->is_object()) {
          for (const std::string& k : KeysOf(*m.value)) keys.push_back(k);
        }
      }
      if (keys.empty()) return false;
      v[keys[Pick(rng, keys.size())]] = OtherType(rng, json(nullptr));
      return true;
    }
  }
}

// Writes doc into data if it fits. Invalid UTF-8 from byte mutations is
// replaced (nlohmann would refuse to write it).
size_t Write(const json& doc, uint8_t* data, size_t max_size) {
  std::string text = Text(doc);
  if (text.size() > max_size) return 0;
  std::copy_n(text.data(), text.size(), data);
  return text.size();
}

json Parse(const uint8_t* data, size_t size) {
  return json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
}

size_t Mutate(uint8_t* data, size_t size, size_t max_size, unsigned int seed, const json* other) {
  json doc = Parse(data, size);
  if (doc.is_discarded()) return LLVMFuzzerMutate(data, size, max_size);
  Rng rng(seed);
  int changes = 1 + static_cast<int>(Pick(rng, 3));
  for (int tries = 0; changes > 0 && tries < 16; ++tries) {
    if (MutateOnce(doc, rng, other)) --changes;
  }
  size_t written = Write(doc, data, max_size);
  return written != 0 ? written : LLVMFuzzerMutate(data, size, max_size);
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  // Now and then a plain byte mutation: it finds what the parsers do with
  // text that is almost JSON.
  if (seed % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  try {
    return Mutate(data, size, max_size, seed, nullptr);
  } catch (const json::exception&) {  // a mutation nlohmann refuses: mutate bytes instead
    return LLVMFuzzerMutate(data, size, max_size);
  }
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  json second = Parse(data2, size2);
  const size_t n = std::min(size1, max_out_size);
  std::memcpy(out, data1, n);
  if (second.is_discarded()) {
    // Not JSON: the first's head and the second's tail.
    const size_t cut = n / 2;
    const size_t tail = std::min(size2 / 2, max_out_size - cut);
    std::memcpy(out + cut, data2 + size2 - tail, tail);
    return cut + tail;
  }
  json first = Parse(out, n);
  if (first.is_discarded()) return n;
  Rng rng(seed);
  std::vector<Node> mine = Nodes(first);
  std::vector<Node> theirs = Nodes(second);
  *mine[Pick(rng, mine.size())].value = *theirs[Pick(rng, theirs.size())].value;
  size_t written = Write(first, out, max_out_size);
  return written != 0 ? written : n;
}
