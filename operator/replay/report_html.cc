#include "operator/replay/report_html.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "operator/common/rfc3339.h"
#include "operator/common/verdict.h"
#include "operator/common/version.h"

namespace allocguard::replay {

using memory::kBytesPerMiB;

namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string F(double v, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

const char* VerdictClass(Verdict v) {
  if (v == Verdict::kFlat) return "ok";
  if (v == Verdict::kInconclusive) return "warn";
  return "bad";
}

// The axes every chart of one report shares, so that variants compare at a
// glance: minutes up to the longest run, MiB up to the highest sample of
// any variant, rounded to readable steps.
struct Scale {
  double minutes = 1;
  double y_top = 1;
  double y_step = 1;
};

Scale SharedScale(const std::vector<const CsvRun*>& runs) {
  double t_max = 60;
  double y_max = 1;
  for (const CsvRun* run : runs) {
    for (const auto& row : run->rows) {
      t_max = std::max(t_max, row.memory.t_seconds);
      y_max = std::max(y_max, static_cast<double>(row.memory.JudgedBytes()) / kBytesPerMiB);
      if (row.books_in_use_bytes && row.books_retained_bytes) {
        y_max = std::max(y_max,
                         static_cast<double>(*row.books_in_use_bytes + *row.books_retained_bytes) /
                             kBytesPerMiB);
      }
    }
  }
  Scale s;
  s.minutes = std::ceil(t_max / 60.0);
  s.y_step = std::pow(10, std::floor(std::log10(y_max)));
  if (y_max / s.y_step < 3) s.y_step /= 2;
  s.y_top = std::ceil(y_max / s.y_step) * s.y_step;
  return s;
}

// A chart of judged memory (MiB) against minutes on the report's shared
// scale: samples as a thin line, floors as dots, the least-squares floor line
// across the floors' span, and around it the flat threshold's band: the
// floors a run could have at its start's level while staying within
// +/- the threshold slope.
// Where a time and a memory figure land in a chart.
struct Frame {
  double w = 860, h = 300, left = 60, right = 20, top = 20, bottom = 40;
  double minutes = 1, y_top = 1;
  double X(double t_s) const { return left + (t_s / 60.0) / minutes * (w - left - right); }
  double Y(double mib) const {
    return top + (1 - std::clamp(mib, 0.0, y_top) / y_top) * (h - top - bottom);
  }
};

// The grid, the axes and their labels, and the warm-up shading.
std::string Axes(const Frame& fr, double y_step, int warmup_minutes) {
  const double w = fr.w;
  const double h = fr.h;
  const double left = fr.left;
  const double right = fr.right;
  const double top = fr.top;
  const double bottom = fr.bottom;
  const double minutes = fr.minutes;
  const double y_top = fr.y_top;
  std::string svg;
  for (double y = 0; y <= y_top + 1e-9; y += y_step) {
    svg += R"(<line class="grid" x1=")" + F(left) + "\" x2=\"" + F(w - right) + "\" y1=\"" +
           F(fr.Y(y)) + "\" y2=\"" + F(fr.Y(y)) + R"("/><text class="axis" x=")" + F(left - 6) +
           "\" y=\"" + F(fr.Y(y) + 4) + R"(" text-anchor="end">)" + F(y, 0) + "</text>";
  }
  int tick = minutes > 20 ? 5 : 1;
  for (int m = 0; m <= minutes; m += tick) {
    svg += R"(<text class="axis" x=")" + F(fr.X(m * 60.0)) + "\" y=\"" + F(h - bottom + 16) +
           R"(" text-anchor="middle">)" + std::to_string(m) + "</text>";
  }
  svg += R"(<text class="axis" x=")" + F((left + w - right) / 2) + "\" y=\"" + F(h - 6) +
         R"(" text-anchor="middle">minutes</text>)";
  svg += R"(<text class="axis" x="14" y=")" + F(top + (h - top - bottom) / 2) +
         "\" transform=\"rotate(-90 14 " + F(top + (h - top - bottom) / 2) +
         ")\" text-anchor=\"middle\">anon + dirty, MiB</text>";
  if (warmup_minutes > 0) {
    svg += R"(<rect class="warmup" x=")" + F(fr.X(0)) + "\" y=\"" + F(top) + "\" width=\"" +
           F(fr.X(60.0 * warmup_minutes) - fr.X(0)) + "\" height=\"" + F(h - top - bottom) +
           "\"><title>warm-up, not judged</title></rect>";
  }
  return svg;
}

// The flat threshold's band (returned) and the fitted floor line (into
// *fit_line, drawn last, over the samples); nothing below two floors.
std::string BandAndFit(const Frame& fr, const VariantResult& r, std::string* fit_line) {
  if (r.floors.size() < 2) return "";
  memory::SlopeFit fit = memory::FitFloorSlope(r.floors);
  double m0 = r.floors.front().minute;
  double m1 = r.floors.back().minute;
  auto at = [&](double m) {
    return (fit.intercept_bytes + fit.slope_bytes_per_minute * m) / kBytesPerMiB;
  };
  // The band: from the fit's start, slopes of -threshold to +threshold
  // (GiB/h as MiB per minute). A fit inside it is a slope below the
  // threshold; one leaving it through the top is a floor rising faster.
  const double per_minute = r.settings.max_slope_gib_per_h * 1024.0 / 60.0;
  const double x0 = fr.X(m0 * 60 + 30);
  const double x1 = fr.X(m1 * 60 + 30);
  const double y0 = at(m0);
  *fit_line = R"(<line class="fit" x1=")" + F(x0) + "\" y1=\"" + F(fr.Y(y0)) + "\" x2=\"" + F(x1) +
              "\" y2=\"" + F(fr.Y(at(m1))) + "\"><title>floor slope " +
              F(fit.SlopeGiBPerHour(), 2) + " GiB/h</title></line>";
  return R"(<polygon class="band" points=")" + F(x0) + "," + F(fr.Y(y0)) + " " + F(x1) + "," +
         F(fr.Y(y0 + per_minute * (m1 - m0))) + " " + F(x1) + "," +
         F(fr.Y(y0 - per_minute * (m1 - m0))) + "\"><title>flat threshold: +/-" +
         F(r.settings.max_slope_gib_per_h, 2) + " GiB/h from the fit's start</title></polygon>";
}

// The allocator's books (docs/allocator-books.md) stacked under the judged
// figure: bytes in use from zero, bytes retained on top of them, one point
// per sample that has both. Each run of consecutive such samples is its own
// pair of areas (a sample without books ends one). Empty without books.
std::string BooksAreas(const Frame& fr, const CsvRun& run) {
  std::vector<std::vector<const SampleRow*>> spans(1);
  for (const SampleRow& row : run.rows) {
    if (row.books_in_use_bytes && row.books_retained_bytes) {
      spans.back().push_back(&row);
    } else if (!spans.back().empty()) {
      spans.emplace_back();
    }
  }
  std::string svg;
  for (const auto& span : spans) {
    if (span.empty()) continue;
    auto x = [&](const SampleRow* r) { return F(fr.X(r->memory.t_seconds)); };
    auto in_use = [](const SampleRow* r) {
      return static_cast<double>(*r->books_in_use_bytes) / kBytesPerMiB;
    };
    auto held = [](const SampleRow* r) {
      return static_cast<double>(*r->books_in_use_bytes + *r->books_retained_bytes) / kBytesPerMiB;
    };
    // In use: its line forward, then the zero line back.
    std::string in_use_points;
    for (const SampleRow* r : span) in_use_points += x(r) + "," + F(fr.Y(in_use(r))) + " ";
    in_use_points += x(span.back()) + "," + F(fr.Y(0)) + " " + x(span.front()) + "," + F(fr.Y(0));
    // Retained: the top of the stack forward, then the in-use line back.
    std::string retained_points;
    for (const SampleRow* r : span) retained_points += x(r) + "," + F(fr.Y(held(r))) + " ";
    for (auto it = span.rbegin(); it != span.rend(); ++it) {
      retained_points += x(*it) + "," + F(fr.Y(in_use(*it))) + (it + 1 == span.rend() ? "" : " ");
    }
    const SampleRow* first = span.front();
    const SampleRow* last = span.back();
    svg += R"(<polygon class="books-in-use" points=")" + in_use_points +
           "\"><title>allocator books: in use " + F(in_use(first), 0) + " → " + F(in_use(last), 0) +
           " MiB</title></polygon>";
    svg += R"(<polygon class="books-retained" points=")" + retained_points +
           "\"><title>allocator books: retained " + F(held(first) - in_use(first), 0) + " → " +
           F(held(last) - in_use(last), 0) + " MiB</title></polygon>";
  }
  return svg;
}

// The last sample with both books figures, or null when the run has none.
const SampleRow* LastBooks(const CsvRun& run) {
  auto last = std::find_if(run.rows.rbegin(), run.rows.rend(), [](const SampleRow& r) {
    return r.books_in_use_bytes.has_value() && r.books_retained_bytes.has_value();
  });
  return last == run.rows.rend() ? nullptr : &*last;
}

std::string Chart(const CsvRun& run, const VariantResult& r, const Scale& scale) {
  const Frame fr{.minutes = scale.minutes, .y_top = scale.y_top};
  std::string svg = "<svg viewBox=\"0 0 " + F(fr.w, 0) + " " + F(fr.h, 0) +
                    R"(" role="img" aria-label="memory of )" + Escape(r.variant) + "\">";
  svg += Axes(fr, scale.y_step, r.settings.warmup_minutes);
  // The books at the bottom of the stack, under everything judged.
  svg += BooksAreas(fr, run);
  // The fit and its band first, under the samples and floors.
  std::string fit_line;
  svg += BandAndFit(fr, r, &fit_line);
  std::string points;
  for (const auto& row : run.rows) {
    points += F(fr.X(row.memory.t_seconds)) + "," +
              F(fr.Y(static_cast<double>(row.memory.JudgedBytes()) / kBytesPerMiB)) + " ";
  }
  svg += R"(<polyline class="samples" points=")" + points + "\"/>";
  for (const auto& f : r.floors) {
    // Dot at the middle of the minute it is the floor of.
    svg += R"(<circle class="floor" cx=")" + F(fr.X(f.minute * 60.0 + 30)) + "\" cy=\"" +
           F(fr.Y(f.floor_bytes / kBytesPerMiB)) + R"(" r="4"><title>minute )" +
           std::to_string(f.minute) + ": floor " + F(f.floor_bytes / kBytesPerMiB, 0) +
           " MiB</title></circle>";
  }
  svg += fit_line;
  svg += "</svg>";
  return svg;
}

// The CSV of variant v (matched by name), or null.
const CsvRun* FindRun(const std::vector<CsvRun>& runs, const VariantResult& v) {
  auto run = std::find_if(runs.begin(), runs.end(),
                          [&](const CsvRun& r) { return r.Header("variant") == v.variant; });
  return run == runs.end() ? nullptr : &*run;
}

// The samples of variant v, or null when it has none.
const CsvRun* RunOf(const std::vector<CsvRun>& runs, const VariantResult& v) {
  const CsvRun* run = FindRun(runs, v);
  return run == nullptr || run->rows.empty() ? nullptr : run;
}

std::string Recorded(const std::string& value) {
  return value.empty() ? "<i>not recorded in the CSV</i>" : Escape(value);
}

// glibc malloc's arena limit for a variant: what MALLOC_ARENA_MAX in its env
// sets, else glibc's default of 8 per CPU on 64-bit; other allocators have
// none.
std::string ArenaLimit(const VariantResult& v, const std::string& cpus) {
  const std::string key = "MALLOC_ARENA_MAX=";
  for (size_t pos = v.env.find(key); pos != std::string::npos; pos = v.env.find(key, pos + 1)) {
    if (pos == 0 || v.env[pos - 1] == ' ') {
      return Escape(v.env.substr(pos + key.size(), v.env.find(' ', pos) - pos - key.size())) +
             " (MALLOC_ARENA_MAX)";
    }
  }
  if (v.allocator != "glibc") return "— (" + Escape(v.allocator) + ", not glibc malloc)";
  char* end = nullptr;
  const double n = cpus.empty() ? 0 : std::strtod(cpus.c_str(), &end);
  if (!cpus.empty() && end == cpus.c_str() + cpus.size() && n >= 1 && n <= 1 << 20) {
    return "glibc's default, 8 per CPU: " + F(8 * n, 0) + " on the " + F(n, 0) + " CPUs it ran on";
  }
  return "glibc's default, 8 per CPU";
}

std::string MachineText(const std::string& host, const std::string& cpus) {
  std::string machine = host;
  if (!cpus.empty()) machine += (machine.empty() ? "" : ", ") + cpus + " CPUs";
  return machine;
}

// "20.000000" as the header writes a rate: "20".
std::string RateText(std::string rate) {
  if (rate.find('.') != std::string::npos) {
    rate.erase(rate.find_last_not_of('0') + 1);
    if (!rate.empty() && rate.back() == '.') rate.pop_back();
  }
  return rate;
}

std::string JudgedText(const JudgeSettings& j) {
  return "flat below " + F(j.max_slope_gib_per_h, 2) + " GiB/h of floor slope; samples every " +
         F(j.sample_interval_seconds, 1) + " s; " + std::to_string(j.warmup_minutes) +
         " warm-up minute(s) not judged; planned " +
         std::to_string(j.planned_minutes > 0 ? j.planned_minutes : j.max_minutes) +
         " min, at most " + std::to_string(j.max_minutes) + " min";
}

// A variant's allocator, environment, library and arena limit, as HTML.
std::string VariantText(const VariantResult& v, const std::string& cpus) {
  std::string what = Escape(v.allocator.empty() ? "unknown allocator" : v.allocator);
  if (!v.env.empty()) what += ", env <code>" + Escape(v.env) + "</code>";
  if (!v.library.empty()) what += ", <code>" + Escape(v.library) + "</code>";
  what += "; arena limit: " + ArenaLimit(v, cpus);
  return what;
}

// What was run, where and how it was judged: the candidate's CSV header (a
// CSV written before a key was recorded says so), the judge's settings, and
// per variant its allocator, environment, library and arena limit.
std::string RunMetadata(const ReplaySummary& summary, const std::vector<CsvRun>& runs) {
  const CsvRun* candidate =
      summary.variants.empty() ? nullptr : FindRun(runs, summary.variants.front());
  const auto header = [&](const std::string& key) {
    return candidate == nullptr ? std::string() : candidate->Header(key);
  };
  const std::string machine = MachineText(header("host"), header("cpus"));
  std::string load;
  if (!header("base_url").empty()) {
    load = header("base_url") + ", " + RateText(header("rate")) + " requests/s open loop, " +
           header("workers") + " connections, seed " + header("seed");
  }
  std::string rows;
  const auto row = [&](const std::string& key, const std::string& value_html) {
    rows += "<tr><td>" + key + "</td><td>" + value_html + "</td></tr>\n";
  };
  row("recorded", Recorded(header("started")));
  row("recorded by", header("allocguard_version").empty()
                         ? Recorded("")
                         : "allocguard " + Escape(header("allocguard_version")));
  row("report written", Escape(FormatRfc3339(std::chrono::system_clock::now(), false)) +
                            " by allocguard " + Escape(std::string(Version())));
  row("machine", Recorded(machine));
  row("command", Recorded(header("command").empty() ? header("attached_pid") : header("command")));
  row("load", Recorded(load));
  if (!summary.variants.empty()) row("judged", JudgedText(summary.variants.front().settings));
  for (const auto& v : summary.variants) {
    row("variant " + Escape(v.variant), VariantText(v, header("cpus")));
  }
  return "<h2>Run</h2><table class=\"meta\">\n" + rows + "</table>\n";
}

// What the table's columns and the charts' marks mean.
std::string Glossary() {
  // The verdicts are named by VerdictName, as everywhere they are shown.
  static const char* const kTerms[][2] = {
      {"floor",
       "the lowest judged sample (anonymous memory plus dirty and writeback pages) of "
       "each minute after warm-up: memory the process holds even at its quietest"},
      {"slope GiB/h", "the floors' least-squares slope, per hour: how fast the floor rises"},
      {"interval",
       "the slope's confidence interval at the decision; Flat needs its top below "
       "the threshold, Ratchet its bottom above it"},
      {"floor MiB", "the median floor: the level the variant settled at"},
      {"final MiB", "the last minute's floor"},
      {"peak MiB", "the highest judged sample"},
      {"limit MiB",
       "a memory limit for this variant: the peak plus a quarter, rounded up to "
       "64 MiB"},
      {"CPU s", "CPU seconds the workload used over the run"},
      {"p50 ms, p99 ms", "median and 99th-percentile request latency of the load"},
      {"late", "requests sent later than the open-loop schedule, when the driver fell behind"},
      {"errors", "responses outside the load's expected statuses"},
      {"min", "minutes the variant ran"},
      {"threshold band",
       "the floors a run starting at the fit's first point could have while "
       "its slope stays within the flat threshold, up or down"},
      {"in use, retained",
       "the allocator's own books (the stats agent's), stacked under the samples: bytes the "
       "program has allocated and not freed, and on top bytes the allocator holds free "
       "without giving them back"},
      {VerdictName(Verdict::kFlat), "the floor's slope is below the threshold"},
      {VerdictName(Verdict::kRatchet), "the floor rose faster than the threshold"},
      {VerdictName(Verdict::kAllocatorRetention),
       "the candidate's floor rose while another allocator's stayed flat "
       "on the same load: the allocator keeps memory it does not give back"},
      {VerdictName(Verdict::kLeak),
       "every variant's floor rose: the program holds the memory, whatever the allocator"},
      {VerdictName(Verdict::kInconclusive), "the run ended before the floors could decide"},
  };
  std::string html = "<h2>Glossary</h2><dl class=\"glossary\">\n";
  for (const auto& term : kTerms) {
    html += "<dt>" + std::string(term[0]) + "</dt><dd>" + term[1] + "</dd>\n";
  }
  return html + "</dl>\n";
}

// The page's head, style and title, up to the overall verdict.
constexpr char kPageHead[] = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>allocguard replay report</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:960px;color:#1d2330;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 4px}
.verdict{font-size:16px;padding:10px 14px;border-radius:6px;margin:12px 0}
.ok{background:#e3f4e6;color:#1c5e2a}.bad{background:#fbe4e2;color:#8a1f14}.warn{background:#fdf3d8;color:#6b4e00}
table{border-collapse:collapse;width:100%;margin:12px 0;font-size:12.5px;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #dde1e8;padding:4px 5px;text-align:right;white-space:nowrap}
td small{display:block;color:#5b6475;white-space:normal;overflow-wrap:anywhere}th{white-space:normal}th{background:#f4f6f9}
td:first-child,th:first-child,td.l{text-align:left}
svg{width:100%;height:auto;background:#fff;border:1px solid #dde1e8;border-radius:4px}
.grid{stroke:#eceff3}.axis{font-size:11px;fill:#5b6475}
.samples{fill:none;stroke:#8fa4c8;stroke-width:1.2}.floor{fill:#1f4fa3}
.fit{stroke:#d2452f;stroke-width:2.2;stroke-dasharray:6 4}.warmup{fill:#f2f2f2}
.books-in-use{fill:#c4b5e3;fill-opacity:.8}.books-retained{fill:#f2c9a0;fill-opacity:.8}
.band{fill:#2e9d4a;fill-opacity:.13;stroke:#2e9d4a;stroke-opacity:.35;stroke-width:1}
table.meta td{text-align:left;white-space:normal;overflow-wrap:anywhere}table.meta td:first-child{width:170px;color:#5b6475}
dl.glossary{display:grid;grid-template-columns:150px 1fr;gap:4px 14px;font-size:13px}
dl.glossary dt{font-weight:600}dl.glossary dd{margin:0;color:#3b4354}
.legend span{display:inline-block;margin-right:16px;font-size:12px;color:#5b6475}
.sw{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:4px}
.expl{color:#3b4354}
</style></head><body>
<h1>allocguard replay report</h1>
<p class="expl">Memory judged: anonymous memory of the workload's processes plus the cgroup's dirty and writeback pages. The per-minute floor is the lowest sample of each minute after warm-up; its least-squares slope decides Flat or Ratchet.</p>
)";

// One row per variant, side by side.
std::string VariantTable(const ReplaySummary& summary) {
  std::string html;
  html +=
      "<table><tr><th>variant</th><th>allocator</th><th>verdict</th><th>slope GiB/h</th>"
      "<th>interval</th><th>floor MiB</th><th>final MiB</th><th>peak MiB</th>"
      "<th>limit MiB</th><th>CPU s</th><th>p50 ms</th><th>p99 ms</th><th>late</th>"
      "<th>errors</th><th>min</th></tr>\n";
  for (const auto& v : summary.variants) {
    const std::string verdict = VerdictName(v.verdict.verdict);
    html += "<tr><td>" + Escape(v.variant) + "</td><td class=\"l\">" + Escape(v.allocator) +
            (v.env.empty() ? "" : " <small>" + Escape(v.env) + "</small>") + "</td><td class=\"" +
            VerdictClass(v.verdict.verdict) + "\">" + verdict + "</td><td>" +
            F(v.judgement.slope_gib_per_h, 2) + "</td><td>[" +
            F(v.judgement.slope_low_gib_per_h, 2) + ", " + F(v.judgement.slope_high_gib_per_h, 2) +
            "]</td><td>" + F(v.floor_level_bytes / kBytesPerMiB, 0) + "</td><td>" +
            F(v.final_floor_bytes / kBytesPerMiB, 0) + "</td><td>" +
            F(v.peak_bytes / kBytesPerMiB, 0) + "</td><td>" +
            F(v.recommended_limit_bytes / kBytesPerMiB, 0) + "</td><td>" + F(v.cpu_seconds) +
            "</td><td>" + (v.p50_ms ? F(*v.p50_ms) : "–") + "</td><td>" +
            (v.p99_ms ? F(*v.p99_ms) : "–") + "</td><td>" + std::to_string(v.requests_late) +
            "</td><td>" + std::to_string(v.unexpected_responses) + "</td><td>" +
            F(v.duration_seconds / 60, 1) + "</td></tr>\n";
  }
  html += "</table>\n";
  return html;
}

// One chart per variant with samples, all on one scale, so that a flat
// variant and a climbing one compare at a glance.
std::string Charts(const ReplaySummary& summary, const std::vector<CsvRun>& runs) {
  std::string html;
  std::vector<const CsvRun*> charted;
  for (const auto& v : summary.variants) {
    if (const CsvRun* run = RunOf(runs, v); run != nullptr) charted.push_back(run);
  }
  const Scale scale = SharedScale(charted);
  if (charted.size() > 1) {
    html += "<p class=\"expl\">Every chart below has the same scale: 0–" + F(scale.y_top, 0) +
            " MiB over " + F(scale.minutes, 0) + " minutes.</p>\n";
  }
  for (const auto& v : summary.variants) {
    html += "<h2>" + Escape(v.variant) + " — " + memory::VerdictName(v.verdict.verdict) + "</h2>";
    html += "<p class=\"expl\">" + Escape(v.verdict.explanation) + "</p>";
    const CsvRun* run = RunOf(runs, v);
    if (run == nullptr) {
      html += "<p>No samples.</p>\n";
      continue;
    }
    html += Chart(*run, v, scale);
    html +=
        "<div class=\"legend\"><span><i class=\"sw\" style=\"background:#8fa4c8\"></i>samples"
        "</span><span><i class=\"sw\" style=\"background:#1f4fa3;height:8px;width:8px;"
        "border-radius:4px\"></i>per-minute floor</span><span><i class=\"sw\" "
        "style=\"background:#d2452f\"></i>floor slope fit</span><span><i class=\"sw\" "
        "style=\"background:#cfe9d5;height:10px\"></i>flat threshold band</span><span><i "
        "class=\"sw\" style=\"background:#e6e6e6;height:10px\"></i>warm-up</span>";
    if (const SampleRow* last = LastBooks(*run); last != nullptr) {
      html +=
          "<span><i class=\"sw\" style=\"background:#c4b5e3;height:10px\"></i>allocator books: "
          "in use (last " +
          F(static_cast<double>(*last->books_in_use_bytes) / kBytesPerMiB, 0) +
          " MiB)</span><span><i class=\"sw\" style=\"background:#f2c9a0;height:10px\"></i>"
          "retained (held free), stacked on in use (last " +
          F(static_cast<double>(*last->books_retained_bytes) / kBytesPerMiB, 0) + " MiB)</span>";
    }
    html += "</div>\n";
  }
  return html;
}

}  // namespace

namespace {

// The bake-off's ranking, its recommendation and the policy snippet.
std::string BakeOffSection(const BakeOff& b) {
  std::string html =
      "<h2>Bake-off</h2><p class=\"expl\">Flat variants first, then by floor "
      "level, CPU per request and p99 latency (floors and CPU within " +
      F(kBakeOffTieFraction * 100, 0) +
      " % of each other tie); costs against the current allocator, " + Escape(b.current) +
      ".</p>\n";
  html +=
      "<table><tr><th>rank</th><th>variant</th><th>verdict</th><th>floor MiB</th>"
      "<th>CPU ms/request</th><th>p99 ms</th><th>against the current</th></tr>\n";
  for (const BakeOffEntry& e : b.ranked) {
    const VariantResult& v = *e.result;
    html += "<tr><td>" + std::to_string(e.rank) + "</td><td class=\"l\">" + Escape(v.variant) +
            "</td><td class=\"" + VerdictClass(v.verdict.verdict) + "\">" +
            VerdictName(v.verdict.verdict) + "</td><td>" +
            F(v.floor_level_bytes / kBytesPerMiB, 0) + "</td><td>" +
            (e.cpu_ms_per_request ? F(*e.cpu_ms_per_request, 3) : "–") + "</td><td>" +
            (v.p99_ms ? F(*v.p99_ms) : "–") + "</td><td class=\"l\">" +
            (v.variant == b.current ? "current" : Escape(FormatBakeOffCosts(e))) + "</td></tr>\n";
  }
  html += "</table>\n<p><strong>" + Escape(b.recommendation) + "</strong></p>\n";
  if (!b.policy_snippet.empty()) {
    html += "<p class=\"expl\">AllocatorPolicy <code>spec</code> for it:</p><pre>" +
            Escape(b.policy_snippet) + "</pre>\n";
  }
  return html;
}

}  // namespace

std::string RenderHtmlReport(const ReplaySummary& summary, const std::vector<CsvRun>& runs,
                             const BakeOff* bake_off) {
  std::string html = kPageHead;
  html += "<div class=\"verdict " + std::string(VerdictClass(summary.overall.verdict)) +
          "\"><strong>" + VerdictName(summary.overall.verdict) + "</strong> — " +
          Escape(summary.overall.explanation) + "</div>\n";
  if (bake_off != nullptr) html += BakeOffSection(*bake_off);
  html += RunMetadata(summary, runs);
  html += VariantTable(summary);
  html += Charts(summary, runs);
  html += Glossary();
  html += "</body></html>\n";
  return html;
}

Status WriteHtmlReport(const ReplaySummary& summary, const std::vector<CsvRun>& runs,
                       const std::string& path, const BakeOff* bake_off) {
  std::ofstream out(path);
  if (!out) return PermissionDenied("cannot write report " + path);
  out << RenderHtmlReport(summary, runs, bake_off);
  out.close();
  if (!out) return PermissionDenied("cannot write report " + path);
  return Status::Ok();
}

}  // namespace allocguard::replay
