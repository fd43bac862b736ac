#pragma once

// The work plan of one /render request, as a pure function of the request.
//
// The demo service reproduces the pattern behind seed 000's production ratchet:
// every request creates its own worker threads, each worker decodes into large
// buffers of varied size, and some small results outlive the request (a cache
// with heavy-tailed lifetimes). Everything a request does is decided here, from
// a hash of its parameters, so that a fixed request mix is an identical load
// under every allocator. The executor (render_service.h) only carries it out.

#include <cstdint>
#include <string>
#include <vector>

#include "operator/common/status.h"

namespace allocguard::workloads {

// What a /render query asks for. Parsed from "?key=K&size=S&w=W".
struct RenderParams {
  std::string key;             // required, 1..128 bytes
  std::string size = "large";  // "small", "medium" or "large"
  int width = 0;               // 0 = not given; else 1..8192 pixels, scales buffers by w/1024
};

// Fails with kInvalidArgument (the service answers 400) naming the bad field.
Result<RenderParams> ParseRenderQuery(const std::string& path_and_query);

// Tuning of the plan. The defaults produce the README demo; see README.md.
struct PlanOptions {
  // Threads per request: min_threads / u^(1/burst_alpha) with u uniform in
  // (0,1], capped at max_threads. alpha = 2 gives a mean of 2 * min_threads
  // and rare, ever larger bursts: the largest burst after n requests grows
  // like sqrt(n), so records keep coming, ever more rarely.
  int min_threads = 2;
  int max_threads = 160;
  double burst_alpha = 2.0;
  // Decode steps per worker thread, uniform in [min_steps, max_steps].
  int min_steps = 2;
  int max_steps = 4;
  // Small temporaries per step (allocated and freed within the step).
  int temporaries_per_step = 64;
  // Long-lived objects per step, their sizes (uniform) and lifetimes:
  // pin_life_min_s / u^(1/pin_life_alpha), capped at pin_life_max_s.
  int pins_per_step = 2;
  int pin_min_bytes = 256;
  int pin_max_bytes = 4096;
  double pin_life_min_s = 10;
  double pin_life_alpha = 1.2;
  double pin_life_max_s = 120;
};

// One long-lived object: allocated by the worker, kept for lifetime_ms.
struct PinPlan {
  uint32_t bytes = 0;
  uint32_t lifetime_ms = 0;
};

// One decode step: a buffer that is written in full, then freed at the end of
// the step; the pins are allocated while the buffer is still live.
struct StepPlan {
  uint64_t buffer_bytes = 0;
  std::vector<PinPlan> pins;
};

struct ThreadPlan {
  std::vector<StepPlan> steps;
};

struct RenderPlan {
  uint64_t seed = 0;  // hash of the request; also seeds the buffer contents
  std::vector<ThreadPlan> threads;

  uint64_t TotalBufferBytes() const;
  uint64_t TotalPinBytes() const;
};

// Deterministic: equal params and options give equal plans.
RenderPlan PlanRender(const RenderParams& params, const PlanOptions& options);

// Validates options given on the command line; the message names the flag.
Status ValidatePlanOptions(const PlanOptions& options);

}  // namespace allocguard::workloads
