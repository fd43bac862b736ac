#pragma once

// <name>.csv: one replay variant's samples, written line by line as the run
// goes (so a killed run keeps its data) and read back by `allocguard analyze`
// and `allocguard report`.
//
// Format: '#'-prefixed "key: value" header lines that describe the run
// (variant, allocator, env, thresholds, cgroup), one column-header line, one
// row per sample, and "# event: ..." lines where something happened (the
// workload failed, the run stopped early), read back as typed RunEvents. Empty cells mean "not
// measured" (e.g. cgroup figures without a cgroup). The last three columns
// (the allocator's books) were added later: files without them still parse.

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/status.h"
#include "operator/memory/memory_sample.h"
#include "operator/replay/run_event.h"

namespace allocguard::replay {

// One row: a memory sample plus the load and process counters at that time.
struct SampleRow {
  memory::MemorySample memory;
  double cpu_seconds = 0;
  int processes = 0;
  int threads = 0;
  int64_t released = 0;
  int64_t sent = 0;
  int64_t completed = 0;
  int64_t late = 0;
  int64_t errors = 0;
  int64_t in_flight = 0;
  int64_t oom_kills = 0;
  // The allocator's books (docs/allocator-books.md): sums over the measured
  // processes whose stats agent published an in-use/retained split; absent
  // when none did (no agent, or an allocator that reports no split).
  std::optional<int64_t> books_in_use_bytes;
  std::optional<int64_t> books_retained_bytes;
  int books_processes = 0;  // processes whose books were read, split or not
};

struct CsvRun {
  // Header values in file order, e.g. {"variant", "glibc"}.
  std::vector<std::pair<std::string, std::string>> header;
  std::vector<SampleRow> rows;
  std::vector<RunEvent> events;

  // The header value for key, or fallback.
  std::string Header(const std::string& key, const std::string& fallback = "") const;
};

class SampleCsvWriter {
 public:
  // Creates or truncates path and writes the header. The file is flushed
  // after every line.
  static Result<SampleCsvWriter> Open(
      const std::string& path, const std::vector<std::pair<std::string, std::string>>& header);
  SampleCsvWriter(SampleCsvWriter&& other) noexcept;
  SampleCsvWriter& operator=(SampleCsvWriter&&) = delete;
  ~SampleCsvWriter();

  Status Append(const SampleRow& row);
  // Writes "# event: " and FormatRunEvent(event), newlines turned to spaces.
  Status AppendEvent(const RunEvent& event);

 private:
  explicit SampleCsvWriter(std::FILE* f) : file_(f) {}
  std::FILE* file_ = nullptr;
};

// Parses a CSV written by SampleCsvWriter. A trailing partial line (the run
// was killed mid-write) is ignored; any other malformed row is an error that
// names the line.
Result<CsvRun> ParseSampleCsv(const std::string& text);
Result<CsvRun> ReadSampleCsv(const std::string& path);

}  // namespace allocguard::replay
