#pragma once

// The path of a member inside a JSON object, as a parser that prunes while
// it reads (kube::ParsePruned) shows it to a MemberFilter. Only standard
// types, so that the filters can be written beside the transforms they
// mirror (operator/api) without depending on the parser.

#include <functional>
#include <string_view>
#include <vector>

namespace allocguard {

// One step from an object's root towards a member: a key of an object, or
// an element of an array (`element` true, `key` empty).
struct PathStep {
  std::string_view key;
  bool element = false;

  bool operator==(const PathStep&) const = default;
};

// From the object's root to a member, ending with the member's own key.
// The views live only as long as the call they are passed to.
using MemberPath = std::vector<PathStep>;

// Whether a member is kept. A member it drops is never built, nor anything
// inside it. Called for every member of every object the parser meets below
// the root it is given (members inside a dropped one included); must not
// throw.
using MemberFilter = std::function<bool(const MemberPath& path)>;

}  // namespace allocguard
