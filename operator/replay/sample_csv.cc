#include "operator/replay/sample_csv.h"

#include <cinttypes>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace allocguard::replay {
namespace {

// Files written before the books columns have the first 18 only.
constexpr const char* kColumnsBeforeBooks =
    "t_s,anon_bytes,rss_bytes,cg_anon_bytes,cg_dirty_bytes,cg_writeback_bytes,cg_usage_bytes,"
    "judged_bytes,cpu_s,processes,threads,released,sent,completed,late,errors,in_flight,oom_kills";
constexpr int kColumnCountBeforeBooks = 18;
constexpr const char* kBooksColumns = "books_in_use_bytes,books_retained_bytes,books_processes";
constexpr int kColumnCount = 21;

std::string Opt(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string(); }

}  // namespace

std::string CsvRun::Header(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : header) {
    if (k == key) return v;
  }
  return fallback;
}

Result<SampleCsvWriter> SampleCsvWriter::Open(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& header) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return PermissionDenied("cannot create " + path + ": " + std::strerror(errno));
  std::fprintf(f, "# allocguard replay samples v1\n");
  for (const auto& [k, v] : header) {
    std::string value = v;
    for (char& c : value) {
      if (c == '\n') c = ' ';
    }
    std::fprintf(f, "# %s: %s\n", k.c_str(), value.c_str());
  }
  std::fprintf(f, "%s,%s\n", kColumnsBeforeBooks, kBooksColumns);
  std::fflush(f);
  return SampleCsvWriter(f);
}

SampleCsvWriter::SampleCsvWriter(SampleCsvWriter&& other) noexcept : file_(other.file_) {
  other.file_ = nullptr;
}

SampleCsvWriter::~SampleCsvWriter() {
  if (file_) std::fclose(file_);
}

Status SampleCsvWriter::Append(const SampleRow& r) {
  const auto& m = r.memory;
  char t[32];
  std::snprintf(t, sizeof t, "%.3f", m.t_seconds);
  std::string line = t;
  char cpu[32];
  std::snprintf(cpu, sizeof cpu, "%.2f", r.cpu_seconds);
  line += "," + std::to_string(m.anon_bytes) + "," + std::to_string(m.rss_bytes) + "," +
          Opt(m.cgroup_anon_bytes) + "," + Opt(m.cgroup_dirty_bytes) + "," +
          Opt(m.cgroup_writeback_bytes) + "," + Opt(m.cgroup_usage_bytes) + "," +
          std::to_string(m.JudgedBytes()) + "," + cpu + "," + std::to_string(r.processes) + "," +
          std::to_string(r.threads) + "," + std::to_string(r.released) + "," +
          std::to_string(r.sent) + "," + std::to_string(r.completed) + "," +
          std::to_string(r.late) + "," + std::to_string(r.errors) + "," +
          std::to_string(r.in_flight) + "," + std::to_string(r.oom_kills) + "," +
          Opt(r.books_in_use_bytes) + "," + Opt(r.books_retained_bytes) + "," +
          std::to_string(r.books_processes) + "\n";
  if (std::fputs(line.c_str(), file_) < 0 || std::fflush(file_) != 0) {
    return Unavailable(std::string("cannot write sample: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status SampleCsvWriter::AppendEvent(const RunEvent& event) {
  std::string e = FormatRunEvent(event);
  for (char& c : e) {
    if (c == '\n') c = ' ';
  }
  if (std::fprintf(file_, "# event: %s\n", e.c_str()) < 0 || std::fflush(file_) != 0) {
    return Unavailable(std::string("cannot write event: ") + std::strerror(errno));
  }
  return Status::Ok();
}

namespace {

Result<int64_t> Int(const std::string& cell, int line, const char* column) {
  try {
    size_t used = 0;
    const int64_t v = std::stoll(cell, &used);
    if (used != cell.size()) throw std::invalid_argument(cell);
    return v;
  } catch (const std::exception&) {
    return InvalidArgument("line " + std::to_string(line) + ": column " + column + " is \"" + cell +
                           "\", not an integer");
  }
}

Result<std::optional<int64_t>> OptInt(const std::string& cell, int line, const char* column) {
  if (cell.empty()) return std::optional<int64_t>();
  AG_ASSIGN_OR_RETURN(int64_t v, Int(cell, line, column));
  return std::optional<int64_t>(v);
}

Result<double> Real(const std::string& cell, int line, const char* column) {
  try {
    size_t used = 0;
    double v = std::stod(cell, &used);
    if (used != cell.size()) throw std::invalid_argument(cell);
    return v;
  } catch (const std::exception&) {
    return InvalidArgument("line " + std::to_string(line) + ": column " + column + " is \"" + cell +
                           "\", not a number");
  }
}

// "# key: value": a header value, or with key "event" an event. Lines
// without ": " are comments.
void ParseCommentLine(const std::string& line, CsvRun* run) {
  std::string body = line.substr(1);
  if (!body.empty() && body[0] == ' ') body = body.substr(1);
  auto colon = body.find(": ");
  if (colon == std::string::npos) return;
  std::string key = body.substr(0, colon);
  std::string value = body.substr(colon + 2);
  if (key == "event") {
    run->events.push_back(ParseRunEvent(value));
  } else {
    run->header.emplace_back(key, value);
  }
}

std::vector<std::string> SplitCells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream row(line);
  while (std::getline(row, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// REQUIRES: cells.size() is kColumnCount or kColumnCountBeforeBooks.
Result<SampleRow> ParseRow(const std::vector<std::string>& cells, int line_no) {
  SampleRow r;
  auto& m = r.memory;
  AG_ASSIGN_OR_RETURN(m.t_seconds, Real(cells[0], line_no, "t_s"));
  // About three years: beyond any run, and its minutes still fit an int
  // (the analysis counts minutes in ints; 1.7e26 s was undefined behaviour).
  constexpr double kMaxSampleSeconds = 1e8;
  if (!(m.t_seconds >= 0 && m.t_seconds <= kMaxSampleSeconds)) {
    return InvalidArgument("line " + std::to_string(line_no) + ": column t_s is \"" + cells[0] +
                           "\", not a time from 0 to 1e8 seconds");
  }
  AG_ASSIGN_OR_RETURN(m.anon_bytes, Int(cells[1], line_no, "anon_bytes"));
  AG_ASSIGN_OR_RETURN(m.rss_bytes, Int(cells[2], line_no, "rss_bytes"));
  AG_ASSIGN_OR_RETURN(m.cgroup_anon_bytes, OptInt(cells[3], line_no, "cg_anon_bytes"));
  AG_ASSIGN_OR_RETURN(m.cgroup_dirty_bytes, OptInt(cells[4], line_no, "cg_dirty_bytes"));
  AG_ASSIGN_OR_RETURN(m.cgroup_writeback_bytes, OptInt(cells[5], line_no, "cg_writeback_bytes"));
  AG_ASSIGN_OR_RETURN(m.cgroup_usage_bytes, OptInt(cells[6], line_no, "cg_usage_bytes"));
  // judged_bytes (cells[7]) is derived; it is recomputed, not trusted.
  AG_ASSIGN_OR_RETURN(r.cpu_seconds, Real(cells[8], line_no, "cpu_s"));
  AG_ASSIGN_OR_RETURN(int64_t processes, Int(cells[9], line_no, "processes"));
  AG_ASSIGN_OR_RETURN(int64_t threads, Int(cells[10], line_no, "threads"));
  r.processes = static_cast<int>(processes);
  r.threads = static_cast<int>(threads);
  AG_ASSIGN_OR_RETURN(r.released, Int(cells[11], line_no, "released"));
  AG_ASSIGN_OR_RETURN(r.sent, Int(cells[12], line_no, "sent"));
  AG_ASSIGN_OR_RETURN(r.completed, Int(cells[13], line_no, "completed"));
  AG_ASSIGN_OR_RETURN(r.late, Int(cells[14], line_no, "late"));
  AG_ASSIGN_OR_RETURN(r.errors, Int(cells[15], line_no, "errors"));
  AG_ASSIGN_OR_RETURN(r.in_flight, Int(cells[16], line_no, "in_flight"));
  AG_ASSIGN_OR_RETURN(r.oom_kills, Int(cells[17], line_no, "oom_kills"));
  if (cells.size() == kColumnCountBeforeBooks) return r;
  AG_ASSIGN_OR_RETURN(r.books_in_use_bytes, OptInt(cells[18], line_no, "books_in_use_bytes"));
  AG_ASSIGN_OR_RETURN(r.books_retained_bytes, OptInt(cells[19], line_no, "books_retained_bytes"));
  AG_ASSIGN_OR_RETURN(int64_t books_processes, Int(cells[20], line_no, "books_processes"));
  if (books_processes < 0 || books_processes > std::numeric_limits<int>::max()) {
    return InvalidArgument("line " + std::to_string(line_no) + ": column books_processes is \"" +
                           cells[20] + "\", not a process count");
  }
  r.books_processes = static_cast<int>(books_processes);
  return r;
}

}  // namespace

Result<CsvRun> ParseSampleCsv(const std::string& text) {
  CsvRun run;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  bool saw_columns = false;
  int columns = kColumnCount;
  bool complete_last = text.empty() || text.back() == '\n';
  size_t total_lines = 0;
  for (char c : text) total_lines += c == '\n';
  if (!complete_last) ++total_lines;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF from other tools
    if (line.empty()) continue;
    if (line[0] == '#') {
      ParseCommentLine(line, &run);
      continue;
    }
    if (!saw_columns) {
      if (line.rfind("t_s,", 0) != 0) {
        return InvalidArgument("line " + std::to_string(line_no) +
                               ": expected the column header starting with t_s, got \"" +
                               line.substr(0, 60) + "\"");
      }
      saw_columns = true;
      if (line == kColumnsBeforeBooks) columns = kColumnCountBeforeBooks;
      continue;
    }
    std::vector<std::string> cells = SplitCells(line);
    if (static_cast<int>(cells.size()) != columns) {
      // A run killed mid-write leaves a partial last line: keep what came before.
      if (static_cast<size_t>(line_no) == total_lines && !complete_last) break;
      return InvalidArgument("line " + std::to_string(line_no) + ": expected " +
                             std::to_string(columns) + " columns, got " +
                             std::to_string(cells.size()));
    }
    AG_ASSIGN_OR_RETURN(SampleRow row, ParseRow(cells, line_no));
    run.rows.push_back(row);
  }
  if (!saw_columns) return InvalidArgument("no column header line (is this a replay CSV?)");
  return run;
}

Result<CsvRun> ReadSampleCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto run = ParseSampleCsv(ss.str());
  if (!run.ok()) return run.status().WithContext(path);
  return run;
}

}  // namespace allocguard::replay
