#pragma once

// A small, thread-safe Prometheus registry: counters, gauges and histograms,
// each a family with fixed label names, plus collector callbacks evaluated at
// scrape time. Render() writes the text exposition format 0.0.4.
//
//   metrics::Registry registry;
//   auto& reconciles = registry.AddCounter("allocguard_reconcile_total",
//                                          "Reconciles by controller and result.",
//                                          {"controller", "result"});
//   reconciles.With({"policy", "success"}).Inc();
//   std::string body = registry.Render();  // serve with kContentType
//
// Thread safety: every method of Registry and of the families and handles may
// be called from any thread at the same time. Updates through a handle are
// lock-free atomics; With() takes the family's mutex.
//
// Names and label names are fixed by the program, so a malformed one, a
// second registration of a name with a different type or labels, or a With()
// with the wrong number of values is a programming error: it aborts with a
// message that names the metric.

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace allocguard::metrics {

// The Content-Type of Render()'s output.
inline constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram, kUntyped };

// "counter", "gauge", "histogram", "untyped".
const char* MetricTypeName(MetricType type);

namespace internal {

// A double updated atomically (compare-and-swap on its bits).
class AtomicDouble {
 public:
  void Add(double delta);
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  double Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

struct HistogramCell {
  explicit HistogramCell(size_t bucket_count) : counts(bucket_count + 1) {}
  // counts[i] counts observations v with bounds[i-1] < v <= bounds[i];
  // the last element counts those above every bound (the +Inf bucket).
  std::vector<std::atomic<uint64_t>> counts;
  AtomicDouble sum;
};

using LabelValues = std::vector<std::string>;

// Common part of a family: name, help, label names and label-set bookkeeping.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names,
             MetricType type)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        type_(type) {}
  virtual ~FamilyBase() = default;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  MetricType type() const { return type_; }

  // Appends this family's HELP, TYPE and sample lines to *out; nothing when
  // the family has no label sets yet.
  virtual void Render(std::string* out) const = 0;

 protected:
  // Aborts unless values.size() == label_names().size().
  void CheckArity(const LabelValues& values) const;

  mutable std::mutex mu_;  // guards the cell maps of the derived classes

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const MetricType type_;
};

}  // namespace internal

// A handle to one label set of a counter. Cheap to copy; stays valid for the
// life of the registry, and after Remove() (updates then go nowhere visible).
class CounterHandle {
 public:
  // Adds 1.
  void Inc() const { cell_->Add(1.0); }
  // Adds delta. A counter never goes down: a negative or NaN delta is ignored.
  void Add(double delta) const;
  double Value() const { return cell_->Get(); }

 private:
  friend class Counter;
  explicit CounterHandle(std::shared_ptr<internal::AtomicDouble> cell) : cell_(std::move(cell)) {}
  std::shared_ptr<internal::AtomicDouble> cell_;
};

class GaugeHandle {
 public:
  void Set(double value) const { cell_->Set(value); }
  void Add(double delta) const { cell_->Add(delta); }
  void Inc() const { cell_->Add(1.0); }
  void Dec() const { cell_->Add(-1.0); }
  double Value() const { return cell_->Get(); }

 private:
  friend class Gauge;
  explicit GaugeHandle(std::shared_ptr<internal::AtomicDouble> cell) : cell_(std::move(cell)) {}
  std::shared_ptr<internal::AtomicDouble> cell_;
};

class HistogramHandle {
 public:
  // Counts value in the first bucket whose upper bound is >= value (bounds
  // are inclusive, as Prometheus's "le" says) and adds it to the sum.
  void Observe(double value) const;

 private:
  friend class Histogram;
  HistogramHandle(const std::vector<double>* bounds, std::shared_ptr<internal::HistogramCell> cell)
      : bounds_(bounds), cell_(std::move(cell)) {}
  const std::vector<double>* bounds_;  // owned by the Histogram family
  std::shared_ptr<internal::HistogramCell> cell_;
};

// A counter family. For a family without labels, Inc()/Add() act on its only
// label set, which exists (and renders as 0) from registration on.
class Counter final : public internal::FamilyBase {
 public:
  using FamilyBase::FamilyBase;
  // The handle for these label values, in the order of the label names;
  // created at 0 on first use.
  CounterHandle With(const internal::LabelValues& label_values);
  // Forgets a label set: it no longer renders. No-op when absent.
  void Remove(const internal::LabelValues& label_values);
  // REQUIRES: the family has no labels.
  void Inc() { With({}).Inc(); }
  void Add(double delta) { With({}).Add(delta); }

  void Render(std::string* out) const override;

 private:
  std::map<internal::LabelValues, std::shared_ptr<internal::AtomicDouble>> cells_;
};

class Gauge final : public internal::FamilyBase {
 public:
  using FamilyBase::FamilyBase;
  GaugeHandle With(const internal::LabelValues& label_values);
  void Remove(const internal::LabelValues& label_values);
  // REQUIRES: the family has no labels.
  void Set(double value) { With({}).Set(value); }
  void Add(double delta) { With({}).Add(delta); }
  void Inc() { With({}).Inc(); }
  void Dec() { With({}).Dec(); }

  void Render(std::string* out) const override;

 private:
  std::map<internal::LabelValues, std::shared_ptr<internal::AtomicDouble>> cells_;
};

class Histogram final : public internal::FamilyBase {
 public:
  // REQUIRES: bounds finite and strictly increasing (Registry checks).
  Histogram(std::string name, std::string help, std::vector<std::string> label_names,
            std::vector<double> bounds);
  HistogramHandle With(const internal::LabelValues& label_values);
  void Remove(const internal::LabelValues& label_values);
  // REQUIRES: the family has no labels.
  void Observe(double value) { With({}).Observe(value); }

  const std::vector<double>& bounds() const { return bounds_; }
  void Render(std::string* out) const override;

 private:
  const std::vector<double> bounds_;
  std::map<internal::LabelValues, std::shared_ptr<internal::HistogramCell>> cells_;
};

// What a collector returns for one metric family at scrape time.
struct CollectedSample {
  // Label name/value pairs, rendered in this order.
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};
struct CollectedFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;  // kCounter, kGauge or kUntyped
  std::vector<CollectedSample> samples;
};
// Called by every Render(), possibly from several threads at once; must not
// call back into the registry. A family it returns whose name is already
// registered, or was returned by an earlier collector with another type, is
// left out. Families of one name and type from several collectors merge:
// their samples render in collector order, and a label set already rendered
// is dropped. So each component can collect its own label set of a shared
// family (e.g. one work queue's depth per controller).
using Collector = std::function<std::vector<CollectedFamily>()>;

// Bucket bounds: count bounds start, start*factor, start*factor^2, ...
// REQUIRES: start > 0, factor > 1, count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// start, start+width, ...  REQUIRES: width > 0, count >= 1.
std::vector<double> LinearBuckets(double start, double width, int count);
// Prometheus's default latency buckets, .005 s to 10 s.
std::vector<double> DefaultBuckets();

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Register a family, or return the one already registered under this name
  // when its type, label names (and bounds) are the same. The reference stays
  // valid for the life of the registry. Names follow Prometheus's rules
  // ([a-zA-Z_:][a-zA-Z0-9_:]*, label names without ':' and not starting "__").
  Counter& AddCounter(const std::string& name, const std::string& help,
                      const std::vector<std::string>& label_names = {});
  Gauge& AddGauge(const std::string& name, const std::string& help,
                  const std::vector<std::string>& label_names = {});
  // bounds: upper bounds of the buckets, strictly increasing and finite; a
  // trailing +Inf is accepted and dropped, the +Inf bucket is always rendered.
  // "le" cannot be a label name.
  Histogram& AddHistogram(const std::string& name, const std::string& help,
                          const std::vector<std::string>& label_names, std::vector<double> bounds);

  // Adds a callback whose families are rendered with the registered ones.
  void AddCollector(Collector collector);
  // A gauge without labels whose value is read from fn at scrape time (e.g. a
  // cache's size). fn follows the Collector rules.
  void AddGaugeFunc(const std::string& name, const std::string& help, std::function<double()> fn);

  // The text exposition format 0.0.4 of every family with at least one label
  // set, ordered by metric name, label sets ordered by their values. Each
  // family: "# HELP", "# TYPE", then its samples; histograms render
  // cumulative _bucket{le=...} lines ending with le="+Inf", then _sum and _count.
  std::string Render() const;

 private:
  internal::FamilyBase* Find(const std::string& name) const;

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<internal::FamilyBase>> families_;
  std::vector<std::shared_ptr<const Collector>> collectors_;
};

// Exposition helpers, exposed for tests and for other renderers.
// A sample value or "le" bound: shortest round-trip decimal, "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);
// A label value with backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& value);
// HELP text with backslash and newline escaped.
std::string EscapeHelp(const std::string& help);

}  // namespace allocguard::metrics
