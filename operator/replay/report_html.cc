#include "operator/replay/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

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

// A chart of judged memory (MiB) against minutes: samples as a thin line,
// floors as dots, the least-squares floor line across the floors' span.
std::string Chart(const CsvRun& run, const VariantResult& r) {
  const double w = 860, h = 300, left = 60, right = 20, top = 20, bottom = 40;
  double t_max = 60, y_max = 1;
  for (const auto& row : run.rows) {
    t_max = std::max(t_max, row.memory.t_seconds);
    y_max = std::max(y_max, static_cast<double>(row.memory.JudgedBytes()) / kBytesPerMiB);
  }
  // Round the axes to readable steps.
  double minutes = std::ceil(t_max / 60.0);
  double y_step = std::pow(10, std::floor(std::log10(y_max)));
  if (y_max / y_step < 3) y_step /= 2;
  double y_top = std::ceil(y_max / y_step) * y_step;
  auto X = [&](double t_s) { return left + (t_s / 60.0) / minutes * (w - left - right); };
  auto Y = [&](double mib) { return top + (1 - mib / y_top) * (h - top - bottom); };

  std::string svg = "<svg viewBox=\"0 0 " + F(w, 0) + " " + F(h, 0) +
                    "\" role=\"img\" aria-label=\"memory of " + Escape(r.variant) + "\">";
  for (double y = 0; y <= y_top + 1e-9; y += y_step) {
    svg += "<line class=\"grid\" x1=\"" + F(left) + "\" x2=\"" + F(w - right) + "\" y1=\"" +
           F(Y(y)) + "\" y2=\"" + F(Y(y)) + "\"/><text class=\"axis\" x=\"" + F(left - 6) +
           "\" y=\"" + F(Y(y) + 4) + "\" text-anchor=\"end\">" + F(y, 0) + "</text>";
  }
  int tick = minutes > 20 ? 5 : 1;
  for (int m = 0; m <= minutes; m += tick) {
    svg += "<text class=\"axis\" x=\"" + F(X(m * 60.0)) + "\" y=\"" + F(h - bottom + 16) +
           "\" text-anchor=\"middle\">" + std::to_string(m) + "</text>";
  }
  svg += "<text class=\"axis\" x=\"" + F((left + w - right) / 2) + "\" y=\"" + F(h - 6) +
         "\" text-anchor=\"middle\">minutes</text>";
  svg += "<text class=\"axis\" x=\"14\" y=\"" + F(top + (h - top - bottom) / 2) +
         "\" transform=\"rotate(-90 14 " + F(top + (h - top - bottom) / 2) +
         ")\" text-anchor=\"middle\">anon + dirty, MiB</text>";
  if (r.settings.warmup_minutes > 0) {
    svg += "<rect class=\"warmup\" x=\"" + F(X(0)) + "\" y=\"" + F(top) + "\" width=\"" +
           F(X(60.0 * r.settings.warmup_minutes) - X(0)) + "\" height=\"" + F(h - top - bottom) +
           "\"><title>warm-up, not judged</title></rect>";
  }
  std::string points;
  for (const auto& row : run.rows) {
    points += F(X(row.memory.t_seconds)) + "," +
              F(Y(static_cast<double>(row.memory.JudgedBytes()) / kBytesPerMiB)) + " ";
  }
  svg += "<polyline class=\"samples\" points=\"" + points + "\"/>";
  for (const auto& f : r.floors) {
    // Dot at the middle of the minute it is the floor of.
    svg += "<circle class=\"floor\" cx=\"" + F(X(f.minute * 60.0 + 30)) + "\" cy=\"" +
           F(Y(f.floor_bytes / kBytesPerMiB)) + "\" r=\"4\"><title>minute " +
           std::to_string(f.minute) + ": floor " + F(f.floor_bytes / kBytesPerMiB, 0) +
           " MiB</title></circle>";
  }
  if (r.floors.size() >= 2) {
    memory::SlopeFit fit = memory::FitFloorSlope(r.floors);
    double m0 = r.floors.front().minute, m1 = r.floors.back().minute;
    auto at = [&](double m) {
      return (fit.intercept_bytes + fit.slope_bytes_per_minute * m) / kBytesPerMiB;
    };
    svg += "<line class=\"fit\" x1=\"" + F(X(m0 * 60 + 30)) + "\" y1=\"" + F(Y(at(m0))) +
           "\" x2=\"" + F(X(m1 * 60 + 30)) + "\" y2=\"" + F(Y(at(m1))) + "\"><title>floor slope " +
           F(fit.SlopeGiBPerHour(), 2) + " GiB/h</title></line>";
  }
  svg += "</svg>";
  return svg;
}

}  // namespace

std::string RenderHtmlReport(const ReplaySummary& summary, const std::vector<CsvRun>& runs) {
  std::string html = R"(<!doctype html>
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
td small{display:block;color:#5b6475}th{white-space:normal}th{background:#f4f6f9}
td:first-child,th:first-child,td.l{text-align:left}
svg{width:100%;height:auto;background:#fff;border:1px solid #dde1e8;border-radius:4px}
.grid{stroke:#eceff3}.axis{font-size:11px;fill:#5b6475}
.samples{fill:none;stroke:#8fa4c8;stroke-width:1.2}.floor{fill:#1f4fa3}
.fit{stroke:#d2452f;stroke-width:2.2;stroke-dasharray:6 4}.warmup{fill:#f2f2f2}
.legend span{display:inline-block;margin-right:16px;font-size:12px;color:#5b6475}
.sw{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:4px}
.expl{color:#3b4354}
</style></head><body>
<h1>allocguard replay report</h1>
<p class="expl">Memory judged: anonymous memory of the workload's processes plus the cgroup's dirty and writeback pages. The per-minute floor is the lowest sample of each minute after warm-up; its least-squares slope decides Flat or Ratchet.</p>
)";
  html += "<div class=\"verdict " + std::string(VerdictClass(summary.overall.verdict)) +
          "\"><strong>" + VerdictName(summary.overall.verdict) + "</strong> — " +
          Escape(summary.overall.explanation) + "</div>\n";
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
  for (const auto& v : summary.variants) {
    html += "<h2>" + Escape(v.variant) + " — " + memory::VerdictName(v.verdict.verdict) + "</h2>";
    html += "<p class=\"expl\">" + Escape(v.verdict.explanation) + "</p>";
    auto run = std::find_if(runs.begin(), runs.end(),
                            [&](const CsvRun& r) { return r.Header("variant") == v.variant; });
    if (run == runs.end() || run->rows.empty()) {
      html += "<p>No samples.</p>\n";
      continue;
    }
    html += Chart(*run, v);
    html +=
        "<div class=\"legend\"><span><i class=\"sw\" style=\"background:#8fa4c8\"></i>samples"
        "</span><span><i class=\"sw\" style=\"background:#1f4fa3;height:8px;width:8px;"
        "border-radius:4px\"></i>per-minute floor</span><span><i class=\"sw\" "
        "style=\"background:#d2452f\"></i>floor slope fit</span><span><i class=\"sw\" "
        "style=\"background:#e6e6e6;height:10px\"></i>warm-up</span></div>\n";
  }
  html += "</body></html>\n";
  return html;
}

Status WriteHtmlReport(const ReplaySummary& summary, const std::vector<CsvRun>& runs,
                       const std::string& path) {
  std::ofstream out(path);
  if (!out) return PermissionDenied("cannot write report " + path);
  out << RenderHtmlReport(summary, runs);
  out.close();
  if (!out) return PermissionDenied("cannot write report " + path);
  return Status::Ok();
}

}  // namespace allocguard::replay
