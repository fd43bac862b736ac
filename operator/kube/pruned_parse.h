#pragma once

// JSON parsed with members dropped as they are read, so that what a cache
// would throw away right after parsing (managedFields, a Pod's spec) is never
// built as a tree: a watch event or a list page then costs the memory of
// what is kept, not of the whole object.

#include <string_view>

#include "operator/common/member_path.h"
#include "operator/kube/object.h"

namespace allocguard::kube {

// As Object::parse(text, nullptr, /*allow_exceptions=*/false) (a discarded
// value when `text` is no JSON), except that every member of an object found
// at `root` or below it is offered to `keep` with its path from that object
// (the path from the top of `text` with `root` taken off) and left out when
// `keep` says no. `root` is a path as MemberPath spells it: {{"object"}} for
// the object of a watch event, {{"items"}, {{}, true}} for each item of a
// list. Members outside the root are all kept; a null `keep` keeps
// everything. Never throws.
Object ParsePruned(std::string_view text, const MemberPath& root, const MemberFilter& keep);

}  // namespace allocguard::kube
