#pragma once

// The HTML report: one self-contained page (inline SVG and CSS, no scripts,
// nothing fetched) with, per variant, a chart of the samples, the per-minute
// floors and the fitted floor line (with the allocator's books, when the run
// recorded them, stacked under the samples: in use from zero, retained on
// top), and a table of figures and verdicts.

#include <string>
#include <vector>

#include "operator/replay/bake_off.h"
#include "operator/replay/sample_csv.h"
#include "operator/replay/variant_result.h"

namespace allocguard::replay {

// runs[i] holds the samples of summary.variants[i] (matched by variant name;
// a variant without samples gets a table row and no chart). With a bake-off
// (`allocguard replay --bake-off`), its ranking, recommendation and policy
// snippet follow the verdict.
std::string RenderHtmlReport(const ReplaySummary& summary, const std::vector<CsvRun>& runs,
                             const BakeOff* bake_off = nullptr);

Status WriteHtmlReport(const ReplaySummary& summary, const std::vector<CsvRun>& runs,
                       const std::string& path, const BakeOff* bake_off = nullptr);

}  // namespace allocguard::replay
