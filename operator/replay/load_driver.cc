#include "operator/replay/load_driver.h"

#include <algorithm>
#include <chrono>

namespace allocguard::replay {

LoadDriver::LoadDriver(const LoadSpec& spec, HttpClientFactory client_factory, Clock* clock,
                       UnexpectedResponseSink sink)
    : spec_(spec),
      client_factory_(std::move(client_factory)),
      clock_(clock),
      sink_(std::move(sink)) {}

LoadDriver::~LoadDriver() { Stop(); }

Status LoadDriver::Start() {
  for (int i = 0; i < spec_.workers; ++i) {
    auto client = client_factory_();
    if (!client.ok()) return client.status().WithContext("load driver connection");
    clients_.push_back(std::move(client).value());
  }
  start_ = clock_->Now();
  for (auto& client : clients_) workers_.emplace_back([this, c = client.get()] { Work(c); });
  dispatcher_ = std::thread([this] { Dispatch(); });
  return Status::Ok();
}

void LoadDriver::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !dispatcher_.joinable()) return;
    stopping_ = true;
    stats_.in_flight -= static_cast<int64_t>(queue_.size());
    queue_.clear();
  }
  queue_cv_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  // Close the keep-alive connections now, so the workload's server is not
  // left waiting on idle connections while it shuts down.
  clients_.clear();
}

void LoadDriver::Dispatch() {
  LoadSchedule schedule(spec_);
  while (true) {
    ScheduledRequest next = schedule.Next();
    Clock::TimePoint at = start_ + std::chrono::duration_cast<Clock::Duration>(next.offset);
    {
      // Sleep towards the scheduled time in slices of at most 50 ms so that
      // Stop() is honoured promptly; the clock decides the time, so tests can
      // run the driver on a fake clock.
      std::unique_lock<std::mutex> lock(mu_);
      while (!stopping_) {
        Clock::TimePoint now = clock_->Now();
        if (now >= at) break;
        lock.unlock();
        clock_->SleepUntil(std::min<Clock::TimePoint>(at, now + std::chrono::milliseconds(50)));
        lock.lock();
      }
      if (stopping_) return;
      queue_.push_back({std::move(next), at});
      ++stats_.released;
      ++stats_.in_flight;
    }
    queue_cv_.notify_one();
  }
}

void LoadDriver::Work(net::HttpClient* client) {
  while (true) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      p = std::move(queue_.front());
      queue_.pop_front();
      ++stats_.sent;
    }
    Clock::TimePoint started = clock_->Now();
    const RequestSpec& spec = spec_.requests[p.request.request_index];
    net::HttpRequest req;
    req.method = p.request.method;
    req.path = p.request.path;
    req.body = p.request.body;
    req.content_type = spec.content_type;
    auto res = client->Send(req);
    if (res.ok()) {
      Record(p, started, res->status, "");
    } else {
      Record(p, started, 0, res.status().message());
    }
  }
}

void LoadDriver::Record(const Pending& p, Clock::TimePoint started, int status,
                        const std::string& detail) {
  Clock::TimePoint done = clock_->Now();
  const RequestSpec& spec = spec_.requests[p.request.request_index];
  bool expected =
      status != 0 && std::find(spec.expect.begin(), spec.expect.end(), status) != spec.expect.end();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.completed;
    --stats_.in_flight;
    if (started - p.scheduled_at > spec_.late_after) ++stats_.late;
    if (!expected) ++stats_.errors;
    latencies_ms_.push_back(static_cast<float>(
        std::chrono::duration<double, std::milli>(done - p.scheduled_at).count()));
    start_delays_ms_.push_back(static_cast<float>(
        std::chrono::duration<double, std::milli>(started - p.scheduled_at).count()));
  }
  if (!expected && sink_) {
    UnexpectedResponse u;
    u.t_seconds = std::chrono::duration<double>(p.request.offset).count();
    u.request_name = spec.name;
    u.method = p.request.method;
    u.path = p.request.path;
    u.status = status;
    u.detail = detail;
    sink_(u);
  }
}

namespace {

struct Quantiles {
  double p50 = 0, p99 = 0, max = 0;
};

Quantiles QuantilesOf(std::vector<float> v) {
  Quantiles q;
  if (v.empty()) return q;
  auto at = [&](double f) {
    auto k = static_cast<size_t>(f * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return static_cast<double>(v[k]);
  };
  q.p50 = at(0.50);
  q.p99 = at(0.99);
  q.max = *std::max_element(v.begin(), v.end());
  return q;
}

}  // namespace

LoadStats LoadDriver::Snapshot() const {
  std::vector<float> latencies;
  std::vector<float> delays;
  LoadStats out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = stats_;
    latencies = latencies_ms_;
    delays = start_delays_ms_;
  }
  Quantiles l = QuantilesOf(std::move(latencies));
  out.p50_ms = l.p50;
  out.p99_ms = l.p99;
  out.max_ms = l.max;
  Quantiles d = QuantilesOf(std::move(delays));
  out.start_delay_p50_ms = d.p50;
  out.start_delay_p99_ms = d.p99;
  out.start_delay_max_ms = d.max;
  return out;
}

}  // namespace allocguard::replay
