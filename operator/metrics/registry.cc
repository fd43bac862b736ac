#include "operator/metrics/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace allocguard::metrics {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "allocguard metrics: %s\n", message.c_str());
  std::abort();
}

bool IsMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool IsLabelName(const std::string& name) {
  if (name.empty() || name.rfind("__", 0) == 0) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

void CheckNames(const std::string& name, const std::vector<std::string>& label_names) {
  if (!IsMetricName(name)) Die("invalid metric name \"" + name + "\"");
  std::set<std::string> seen;
  for (const auto& label : label_names) {
    if (!IsLabelName(label))
      Die(std::string(name).append(": invalid label name \"").append(label).append("\""));
    if (!seen.insert(label).second)
      Die(std::string(name).append(": label \"").append(label).append("\" given twice"));
  }
}

void AppendHeader(std::string* out, const std::string& name, const std::string& help,
                  MetricType type) {
  out->append("# HELP ").append(name).append(" ").append(EscapeHelp(help)).append("\n");
  out->append("# TYPE ").append(name).append(" ").append(MetricTypeName(type)).append("\n");
}

// Appends `name{a="x",b="y"[,le="bound"]} value\n`; no braces without labels.
void AppendSample(std::string* out, const std::string& name,
                  const std::vector<std::string>& label_names,
                  const internal::LabelValues& label_values, const char* le, double value) {
  out->append(name);
  if (!label_names.empty() || le != nullptr) {
    out->push_back('{');
    for (size_t i = 0; i < label_names.size(); ++i) {
      if (i > 0) out->push_back(',');
      out->append(label_names[i]).append("=\"").append(EscapeLabelValue(label_values[i]));
      out->push_back('"');
    }
    if (le != nullptr) {
      if (!label_names.empty()) out->push_back(',');
      out->append("le=\"").append(le).append("\"");
    }
    out->push_back('}');
  }
  out->push_back(' ');
  out->append(FormatValue(value));
  out->push_back('\n');
}

template <typename Cell>
std::shared_ptr<Cell> FindOrNull(
    const std::map<internal::LabelValues, std::shared_ptr<Cell>>& cells,
    const internal::LabelValues& values) {
  auto it = cells.find(values);
  return it == cells.end() ? nullptr : it->second;
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kUntyped:
      return "untyped";
  }
  return "untyped";
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Whole numbers (counts, bytes) in plain digits; to_chars alone would write
  // 100000 as "1e+05".
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(value));
    if (ec == std::errc()) return std::string(buf, end);
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "NaN";  // cannot happen with 64 bytes
  return std::string(buf, end);
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace internal {

void AtomicDouble::Add(double delta) {
  double current = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

void FamilyBase::CheckArity(const LabelValues& values) const {
  if (values.size() != label_names_.size()) {
    Die(name_ + ": " + std::to_string(values.size()) + " label values given for " +
        std::to_string(label_names_.size()) + " label names");
  }
}

}  // namespace internal

// --- Counter ------------------------------------------------------------------

void CounterHandle::Add(double delta) const {
  if (!(delta >= 0)) return;  // also drops NaN
  cell_->Add(delta);
}

CounterHandle Counter::With(const internal::LabelValues& label_values) {
  CheckArity(label_values);
  std::lock_guard<std::mutex> lock(mu_);
  auto& cell = cells_[label_values];
  if (!cell) cell = std::make_shared<internal::AtomicDouble>();
  return CounterHandle(cell);
}

void Counter::Remove(const internal::LabelValues& label_values) {
  std::lock_guard<std::mutex> lock(mu_);
  cells_.erase(label_values);
}

void Counter::Render(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (cells_.empty()) return;
  AppendHeader(out, name(), help(), type());
  for (const auto& [values, cell] : cells_) {
    AppendSample(out, name(), label_names(), values, nullptr, cell->Get());
  }
}

// --- Gauge --------------------------------------------------------------------

GaugeHandle Gauge::With(const internal::LabelValues& label_values) {
  CheckArity(label_values);
  std::lock_guard<std::mutex> lock(mu_);
  auto& cell = cells_[label_values];
  if (!cell) cell = std::make_shared<internal::AtomicDouble>();
  return GaugeHandle(cell);
}

void Gauge::Remove(const internal::LabelValues& label_values) {
  std::lock_guard<std::mutex> lock(mu_);
  cells_.erase(label_values);
}

void Gauge::Render(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (cells_.empty()) return;
  AppendHeader(out, name(), help(), type());
  for (const auto& [values, cell] : cells_) {
    AppendSample(out, name(), label_names(), values, nullptr, cell->Get());
  }
}

// --- Histogram ----------------------------------------------------------------

void HistogramHandle::Observe(double value) const {
  // The first bound >= value; NaN counts only in +Inf, as in client_golang.
  size_t bucket = std::isnan(value) ? bounds_->size()
                                    : std::lower_bound(bounds_->begin(), bounds_->end(), value) -
                                          bounds_->begin();
  cell_->counts[bucket].fetch_add(1, std::memory_order_relaxed);
  cell_->sum.Add(value);
}

Histogram::Histogram(std::string name, std::string help, std::vector<std::string> label_names,
                     std::vector<double> bounds)
    : FamilyBase(std::move(name), std::move(help), std::move(label_names), MetricType::kHistogram),
      bounds_(std::move(bounds)) {}

HistogramHandle Histogram::With(const internal::LabelValues& label_values) {
  CheckArity(label_values);
  std::lock_guard<std::mutex> lock(mu_);
  auto& cell = cells_[label_values];
  if (!cell) cell = std::make_shared<internal::HistogramCell>(bounds_.size());
  return HistogramHandle(&bounds_, cell);
}

void Histogram::Remove(const internal::LabelValues& label_values) {
  std::lock_guard<std::mutex> lock(mu_);
  cells_.erase(label_values);
}

void Histogram::Render(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (cells_.empty()) return;
  AppendHeader(out, name(), help(), type());
  const std::string bucket_name = name() + "_bucket";
  std::vector<std::string> bound_text;
  bound_text.reserve(bounds_.size());
  for (double b : bounds_) bound_text.push_back(FormatValue(b));
  for (const auto& [values, cell] : cells_) {
    // _count is the +Inf bucket, so the two always agree in one scrape.
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += cell->counts[i].load(std::memory_order_relaxed);
      AppendSample(out, bucket_name, label_names(), values, bound_text[i].c_str(),
                   static_cast<double>(cumulative));
    }
    cumulative += cell->counts[bounds_.size()].load(std::memory_order_relaxed);
    AppendSample(out, bucket_name, label_names(), values, "+Inf", static_cast<double>(cumulative));
    AppendSample(out, name() + "_sum", label_names(), values, nullptr, cell->sum.Get());
    AppendSample(out, name() + "_count", label_names(), values, nullptr,
                 static_cast<double>(cumulative));
  }
}

// --- Buckets ------------------------------------------------------------------

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) Die("ExponentialBuckets: bad arguments");
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  if (!(width > 0) || count < 1) Die("LinearBuckets: bad arguments");
  std::vector<double> bounds;
  bounds.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) bounds.push_back(start + width * i);
  return bounds;
}

std::vector<double> DefaultBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

// --- Registry -----------------------------------------------------------------

internal::FamilyBase* Registry::Find(const std::string& name) const {
  auto it = families_.find(name);
  return it == families_.end() ? nullptr : it->second.get();
}

Counter& Registry::AddCounter(const std::string& name, const std::string& help,
                              const std::vector<std::string>& label_names) {
  CheckNames(name, label_names);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto* existing = Find(name)) {
    auto* counter = dynamic_cast<Counter*>(existing);
    if (counter == nullptr || counter->label_names() != label_names) {
      Die(name + ": registered twice with a different type or labels");
    }
    return *counter;
  }
  auto family = std::make_unique<Counter>(name, help, label_names, MetricType::kCounter);
  Counter& ref = *family;
  families_.emplace(name, std::move(family));
  if (label_names.empty()) ref.With({});
  return ref;
}

Gauge& Registry::AddGauge(const std::string& name, const std::string& help,
                          const std::vector<std::string>& label_names) {
  CheckNames(name, label_names);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto* existing = Find(name)) {
    auto* gauge = dynamic_cast<Gauge*>(existing);
    if (gauge == nullptr || gauge->label_names() != label_names) {
      Die(name + ": registered twice with a different type or labels");
    }
    return *gauge;
  }
  auto family = std::make_unique<Gauge>(name, help, label_names, MetricType::kGauge);
  Gauge& ref = *family;
  families_.emplace(name, std::move(family));
  if (label_names.empty()) ref.With({});
  return ref;
}

Histogram& Registry::AddHistogram(const std::string& name, const std::string& help,
                                  const std::vector<std::string>& label_names,
                                  std::vector<double> bounds) {
  CheckNames(name, label_names);
  for (const auto& label : label_names) {
    if (label == "le") Die(name + ": a histogram cannot have a label named \"le\"");
  }
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
      Die(name + ": bucket bounds must be finite and strictly increasing");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto* existing = Find(name)) {
    auto* histogram = dynamic_cast<Histogram*>(existing);
    if (histogram == nullptr || histogram->label_names() != label_names ||
        histogram->bounds() != bounds) {
      Die(name + ": registered twice with a different type, labels or buckets");
    }
    return *histogram;
  }
  auto family = std::make_unique<Histogram>(name, help, label_names, std::move(bounds));
  Histogram& ref = *family;
  families_.emplace(name, std::move(family));
  if (label_names.empty()) ref.With({});
  return ref;
}

void Registry::AddCollector(Collector collector) {
  auto shared = std::make_shared<const Collector>(std::move(collector));
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(shared));
}

void Registry::AddGaugeFunc(const std::string& name, const std::string& help,
                            std::function<double()> fn) {
  CheckNames(name, {});
  AddCollector([name, help, fn = std::move(fn)]() {
    CollectedFamily family{name, help, MetricType::kGauge, {}};
    family.samples.push_back({{}, fn()});
    return std::vector<CollectedFamily>{std::move(family)};
  });
}

std::string Registry::Render() const {
  std::vector<std::shared_ptr<const Collector>> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectors = collectors_;
  }
  // Collectors run without the registry's lock, so a slow one does not hold
  // up registration or another scrape.
  std::map<std::string, CollectedFamily> collected;
  for (const auto& collector : collectors) {
    for (auto& family : (*collector)()) {
      if (!IsMetricName(family.name) || family.type == MetricType::kHistogram) continue;
      auto [it, inserted] = collected.emplace(family.name, family);
      if (inserted || it->second.type != family.type) continue;  // a clash keeps the first
      // The same family from another collector (say, one label set per
      // component): its samples join, a label set already given is dropped.
      for (auto& sample : family.samples) {
        bool seen = false;
        for (const auto& s : it->second.samples) seen = seen || s.labels == sample.labels;
        if (!seen) it->second.samples.push_back(std::move(sample));
      }
    }
  }

  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, family] : families_) collected.erase(name);
  // Merge the two name-ordered sequences.
  auto reg = families_.begin();
  auto col = collected.begin();
  while (reg != families_.end() || col != collected.end()) {
    if (col == collected.end() || (reg != families_.end() && reg->first < col->first)) {
      reg->second->Render(&out);
      ++reg;
      continue;
    }
    const CollectedFamily& family = col->second;
    ++col;
    if (family.samples.empty()) continue;
    AppendHeader(&out, family.name, family.help, family.type);
    for (const auto& sample : family.samples) {
      std::vector<std::string> names;
      internal::LabelValues values;
      bool valid = true;
      for (const auto& [label, value] : sample.labels) {
        valid = valid && IsLabelName(label);
        names.push_back(label);
        values.push_back(value);
      }
      if (valid) AppendSample(&out, family.name, names, values, nullptr, sample.value);
    }
  }
  return out;
}

}  // namespace allocguard::metrics
