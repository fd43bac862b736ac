#include "e2e/workloads/render_service.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>

namespace allocguard::workloads {

void PinStore::Add(std::unique_ptr<char[]> bytes, uint32_t size, Clock::TimePoint expires) {
  std::lock_guard<std::mutex> lock(mu_);
  live_bytes_ += size;
  if (leak_) {
    leaked_.push_back({std::move(bytes), size});
  } else {
    by_deadline_.emplace(expires, Pin{std::move(bytes), size});
  }
}

size_t PinStore::ReleaseExpired(Clock::TimePoint now) {
  std::vector<Pin> expired;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto end = by_deadline_.upper_bound(now);
    for (auto it = by_deadline_.begin(); it != end; ++it) {
      live_bytes_ -= it->second.size;
      expired.push_back(std::move(it->second));
    }
    by_deadline_.erase(by_deadline_.begin(), end);
  }
  return expired.size();
}

uint64_t PinStore::live_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_deadline_.size() + leaked_.size();
}

uint64_t PinStore::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_bytes_;
}

RenderService::RenderService(const RenderServiceOptions& options, Clock* clock)
    : options_(options), clock_(clock), pins_(options.leak) {
  reaper_ = std::thread([this] { ReapLoop(); });
}

RenderService::~RenderService() {
  {
    std::lock_guard<std::mutex> lock(reaper_mu_);
    stopping_ = true;
  }
  reaper_cv_.notify_all();
  reaper_.join();
}

void RenderService::ReapLoop() {
  std::unique_lock<std::mutex> lock(reaper_mu_);
  while (!stopping_) {
    reaper_cv_.wait_for(lock, std::chrono::milliseconds(500));
    lock.unlock();
    pins_.ReleaseExpired(clock_->Now());
    lock.lock();
  }
}

void RenderService::Register(net::HttpServer& server) {
  server.Handle("GET", "/healthz", [](const net::HttpRequest&) {
    return net::HttpResponse{.status = 200, .body = "ok"};
  });
  server.Handle("GET", "/render",
                [this](const net::HttpRequest& request) { return HandleRender(request); });
  server.Handle("GET", "/stats",
                [this](const net::HttpRequest& request) { return HandleStats(request); });
  server.Handle("GET", "/ballast",
                [this](const net::HttpRequest& request) { return ballast_.Handle(request); });
}

net::HttpResponse RenderService::HandleRender(const net::HttpRequest& request) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  Result<RenderParams> params = ParseRenderQuery(request.path);
  if (!params.ok()) {
    return net::HttpResponse{.status = 400, .body = params.status().message() + "\n"};
  }
  RenderPlan plan = PlanRender(*params, options_.plan);
  Result<RenderResult> result = Execute(plan);
  if (!result.ok()) {
    return net::HttpResponse{.status = 503, .body = result.status().message() + "\n"};
  }
  net::HttpResponse response;
  response.status = 200;
  response.headers.emplace("Content-Type", "application/json");
  response.body = R"({"plan":")" + std::to_string(plan.seed) + R"(","threads":)" +
                  std::to_string(result->threads) +
                  ",\"buffer_bytes\":" + std::to_string(result->buffer_bytes) +
                  ",\"pin_bytes\":" + std::to_string(result->pin_bytes) +
                  ",\"checksum\":" + std::to_string(result->checksum) + "}\n";
  return response;
}

net::HttpResponse RenderService::HandleStats(const net::HttpRequest&) const {
  net::HttpResponse response;
  response.status = 200;
  response.headers.emplace("Content-Type", "application/json");
  response.body = "{\"requests\":" + std::to_string(requests_.load()) +
                  ",\"live_threads\":" + std::to_string(live_threads_.load()) +
                  ",\"peak_threads\":" + std::to_string(peak_threads_.load()) +
                  ",\"live_pins\":" + std::to_string(pins_.live_count()) +
                  ",\"live_pin_bytes\":" + std::to_string(pins_.live_bytes()) +
                  ",\"ballast_mib\":" + std::to_string(ballast_.held_mib()) +
                  ",\"leak\":" + (options_.leak ? "true" : "false") + "}\n";
  return response;
}

Result<RenderResult> RenderService::Execute(const RenderPlan& plan) {
  const size_t n = plan.threads.size();
  std::latch started(static_cast<std::ptrdiff_t>(n));
  std::vector<RenderResult> results(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  std::string error;
  for (size_t i = 0; i < n; ++i) {
    try {
      threads.emplace_back(
          [this, &plan, i, &started, &results] { Work(plan, i, started, results[i]); });
    } catch (const std::system_error& e) {
      // The threads already running wait for n arrivals; stand in for the rest.
      started.count_down(static_cast<std::ptrdiff_t>(n - i));
      error = std::string("cannot create worker thread: ") + e.what();
      break;
    }
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) return Unavailable(error);

  RenderResult total;
  total.threads = static_cast<int>(n);
  for (const auto& r : results) {
    total.checksum = total.checksum * 31 + r.checksum;
    total.buffer_bytes += r.buffer_bytes;
    total.pin_bytes += r.pin_bytes;
  }
  return total;
}

void RenderService::Work(const RenderPlan& plan, size_t index, std::latch& started,
                         RenderResult& out) {
  int live = live_threads_.fetch_add(1) + 1;
  int peak = peak_threads_.load();
  while (live > peak && !peak_threads_.compare_exchange_weak(peak, live)) {
  }

  const ThreadPlan& thread = plan.threads[index];
  uint64_t state = plan.seed ^ (0x9e3779b97f4a7c15ULL * (index + 1));
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  bool arrived = false;
  for (const StepPlan& step : thread.steps) {
    // The decoded tile: written in full, as a decoder would.
    auto buffer = std::make_unique_for_overwrite<unsigned char[]>(step.buffer_bytes);
    std::memset(buffer.get(), static_cast<int>(next() & 0xff), step.buffer_bytes);
    for (uint64_t off = 0; off < step.buffer_bytes; off += 4096) {
      buffer[off] = static_cast<unsigned char>(next());
      out.checksum = out.checksum * 131 + buffer[off];
    }
    out.buffer_bytes += step.buffer_bytes;
    if (!arrived) {
      // Every worker of the request holds memory before any finishes.
      started.arrive_and_wait();
      arrived = true;
    }

    // Per-step scratch: many small short-lived objects.
    std::vector<std::string> scratch;
    scratch.reserve(static_cast<size_t>(options_.plan.temporaries_per_step));
    for (int i = 0; i < options_.plan.temporaries_per_step; ++i) {
      scratch.emplace_back(32 + next() % 480, static_cast<char>('a' + i % 26));
    }
    for (const auto& s : scratch) out.checksum += static_cast<unsigned char>(s[s.size() / 2]);

    // Results that outlive the request, allocated while the tile is live.
    for (const PinPlan& pin : step.pins) {
      auto bytes = std::make_unique_for_overwrite<char[]>(pin.bytes);
      std::memset(bytes.get(), static_cast<int>(out.checksum & 0x7f), pin.bytes);
      pins_.Add(std::move(bytes), pin.bytes,
                clock_->Now() + std::chrono::milliseconds(pin.lifetime_ms));
      out.pin_bytes += pin.bytes;
    }
  }
  if (!arrived) started.arrive_and_wait();
  live_threads_.fetch_sub(1);
}

}  // namespace allocguard::workloads
