#include "operator/kube/pruned_parse.h"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

namespace allocguard::kube {

Object ParsePruned(std::string_view text, const MemberPath& root, const MemberFilter& keep) {
  if (!keep) return Object::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  // The containers open at each depth, and for an object the key of the
  // member being read. nlohmann's callback parser reports every start, but
  // no end inside a dropped member, so frames are kept by the depth each
  // event gives rather than pushed and popped.
  struct Frame {
    bool array = false;
    std::string key;
  };
  std::vector<Frame> frames;
  MemberPath path;
  auto callback = [&](int depth, Object::parse_event_t event, Object& parsed) {
    const auto d = static_cast<size_t>(std::max(depth, 0));
    switch (event) {
      case Object::parse_event_t::object_start:
      case Object::parse_event_t::array_start:
        frames.resize(d);
        frames.push_back({event == Object::parse_event_t::array_start, {}});
        return true;
      case Object::parse_event_t::key: {
        // A key at depth d belongs to the object opened at depth d - 1.
        if (d == 0 || frames.size() < d || frames[d - 1].array || !parsed.is_string()) return true;
        frames.resize(d);
        frames[d - 1].key = parsed.get_ref<const std::string&>();
        if (d <= root.size()) return true;
        path.clear();
        for (size_t i = 0; i < d; ++i) {
          const Frame& f = frames[i];
          PathStep step = f.array ? PathStep{{}, true} : PathStep{f.key, false};
          if (i < root.size()) {
            if (!(step == root[i])) return true;  // outside the root: kept
          } else {
            path.push_back(step);
          }
        }
        return keep(path);
      }
      default:
        return true;
    }
  };
  try {
    return Object::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  } catch (const std::exception&) {
    return Object(Object::value_t::discarded);
  }
}

}  // namespace allocguard::kube
