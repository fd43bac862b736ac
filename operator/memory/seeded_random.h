#pragma once

// The random numbers of the synthetic trace generators (floor and sample
// corpora): std::mt19937_64, whose output the standard fixes, behind our own
// transforms (the standard's distributions differ between libraries), so a
// corpus is the same on every platform and every build.

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace allocguard::memory {

// splitmix64: decorrelates nearby seeds before they seed a generator.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The minute in [first, last] at which trace `index` of a corpus drawn with
// `seed` has its event (a step, the start of growth): spread over the range,
// independent of the trace's own noise.
inline int InstanceMinute(uint64_t seed, int index, int first, int last) {
  const uint64_t r =
      SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(index) + 0x5851f42d4c957f2dULL));
  const int span = last - first + 1;
  return first + static_cast<int>(r % static_cast<uint64_t>(span));
}

class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(SplitMix64(seed)) {}

  double Uniform() {  // in (0, 1)
    return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53;
  }
  // Standard normal by Box–Muller; the second value is discarded for simplicity.
  double Gaussian() {
    const double u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  }
  double Exponential(double mean) { return -mean * std::log(Uniform()); }

 private:
  std::mt19937_64 engine_;
};

}  // namespace allocguard::memory
