#include "e2e/workloads/ballast.h"

#include <sys/mman.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace allocguard::workloads {
namespace {

constexpr size_t kChunkBytes = 1 << 20;
// The most a request may ask for: a typo must not take the node's memory.
constexpr uint64_t kMaxMiB = uint64_t{64} * 1024;
constexpr auto kGrowTick = std::chrono::milliseconds(100);

// Parses a non-negative decimal; false for anything else.
bool ParseNumber(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value) || value < 0) return false;
  *out = value;
  return true;
}

}  // namespace

Ballast::Ballast() : grower_([this] { GrowLoop(); }) {}

Ballast::~Ballast() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    ShrinkToLocked(0);
  }
  cv_.notify_all();
  grower_.join();
}

bool Ballast::MapChunkLocked() {
  void* p = mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  std::memset(p, 0xab, kChunkBytes);  // resident, anonymous, dirty
  chunks_.push_back(p);
  return true;
}

void Ballast::ShrinkToLocked(uint64_t mib) {
  while (chunks_.size() > mib) {
    munmap(chunks_.back(), kChunkBytes);
    chunks_.pop_back();
  }
}

void Ballast::SetTarget(uint64_t mib, double rate_mib_per_second) {
  std::lock_guard<std::mutex> lock(mu_);
  target_mib_ = mib;
  rate_ = rate_mib_per_second;
  ShrinkToLocked(mib);
  if (rate_ <= 0) {
    while (chunks_.size() < target_mib_ && MapChunkLocked()) {
    }
  }
  cv_.notify_all();
}

void Ballast::GrowLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  double owed = 0;  // fractional MiB carried between ticks
  while (!stopping_) {
    if (chunks_.size() >= target_mib_ || rate_ <= 0) {
      owed = 0;
      cv_.wait(lock);
      continue;
    }
    cv_.wait_for(lock, kGrowTick);
    if (stopping_) break;
    owed += rate_ * std::chrono::duration<double>(kGrowTick).count();
    while (owed >= 1 && chunks_.size() < target_mib_) {
      if (!MapChunkLocked()) break;
      owed -= 1;
    }
  }
}

uint64_t Ballast::held_mib() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chunks_.size();
}

uint64_t Ballast::target_mib() const {
  std::lock_guard<std::mutex> lock(mu_);
  return target_mib_;
}

net::HttpResponse Ballast::Handle(const net::HttpRequest& request) {
  double mib = 0;
  double rate = 0;
  const std::string mib_text = net::QueryParam(request.path, "mib");
  const std::string rate_text = net::QueryParam(request.path, "rate");
  if (!ParseNumber(mib_text, &mib) || mib > kMaxMiB) {
    return net::HttpResponse{
        .status = 400,
        .body = "mib must be a whole number of MiB from 0 to " + std::to_string(kMaxMiB) + "\n"};
  }
  if (!rate_text.empty() && !ParseNumber(rate_text, &rate)) {
    return net::HttpResponse{.status = 400,
                             .body = "rate must be a non-negative number of MiB per second\n"};
  }
  SetTarget(static_cast<uint64_t>(mib), rate);
  net::HttpResponse response;
  response.status = 200;
  response.headers.emplace("Content-Type", "application/json");
  response.body = "{\"target_mib\":" + std::to_string(target_mib()) +
                  ",\"held_mib\":" + std::to_string(held_mib()) + "}\n";
  return response;
}

}  // namespace allocguard::workloads
