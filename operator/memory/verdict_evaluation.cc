#include "operator/memory/verdict_evaluation.h"

#include <algorithm>
#include <cmath>

namespace allocguard::memory {

RunOutcome ReplayJudge(const FloorJudge& judge, std::span<const MinuteFloor> floors) {
  RunOutcome outcome;
  for (size_t n = 1; n <= floors.size(); ++n) {
    outcome.judgement = judge.Judge(floors.first(n), /*final=*/false);
    if (outcome.judgement.decision != FloorDecision::kContinue) {
      outcome.minutes_elapsed = floors[n - 1].minute + 1;
      return outcome;
    }
  }
  outcome.judgement = judge.Judge(floors, /*final=*/true);
  outcome.minutes_elapsed = floors.empty() ? 0 : floors.back().minute + 1;
  return outcome;
}

void VerdictCounts::Add(const RunOutcome& outcome) {
  ++traces;
  switch (outcome.judgement.decision) {
    case FloorDecision::kRatchet:
      ++ratchet;
      break;
    case FloorDecision::kFlat:
      ++flat;
      break;
    case FloorDecision::kInconclusive:
    case FloorDecision::kContinue:  // a judge that never decides counts as no verdict
      ++inconclusive;
      break;
  }
  minutes.push_back(outcome.minutes_elapsed);
}

void VerdictCounts::Merge(const VerdictCounts& other) {
  traces += other.traces;
  ratchet += other.ratchet;
  flat += other.flat;
  inconclusive += other.inconclusive;
  minutes.insert(minutes.end(), other.minutes.begin(), other.minutes.end());
}

double VerdictCounts::MedianMinutes() const {
  if (minutes.empty()) return std::nan("");
  std::vector<int> sorted = minutes;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  if (sorted.size() % 2 == 1) return sorted[mid];
  return (sorted[mid - 1] + sorted[mid]) / 2.0;
}

std::vector<ClassEvaluation> EvaluateCorpus(std::span<const TraceClass> corpus,
                                            int traces_per_class, uint64_t seed,
                                            const FloorJudge& old_rule,
                                            const FloorJudge& new_rule) {
  std::vector<ClassEvaluation> out;
  for (size_t k = 0; k < corpus.size(); ++k) {
    ClassEvaluation e{.trace_class = corpus[k]};
    const uint64_t class_seed = seed * 1000003ULL + k;
    for (int i = 0; i < traces_per_class; ++i) {
      const TraceSpec spec = InstanceSpec(corpus[k], class_seed, i);
      const auto floors = GenerateFloorTrace(spec, class_seed * 7919ULL + static_cast<uint64_t>(i));
      e.old_rule.Add(ReplayJudge(old_rule, floors));
      e.new_rule.Add(ReplayJudge(new_rule, floors));
    }
    out.push_back(std::move(e));
  }
  return out;
}

double RuleSummary::FalseRatchetRate() const {
  return not_ratchet_traces ? static_cast<double>(false_ratchets) / not_ratchet_traces : 0;
}

double RuleSummary::MissedRatchetRate() const {
  return ratchet_traces ? static_cast<double>(missed_ratchets) / ratchet_traces : 0;
}

RuleSummary Summarize(std::span<const ClassEvaluation> evaluations, bool new_rule) {
  RuleSummary s;
  for (const ClassEvaluation& e : evaluations) {
    const VerdictCounts& c = new_rule ? e.new_rule : e.old_rule;
    if (c.traces == 0) continue;
    if (e.trace_class.truth == TraceTruth::kNotRatchet) {
      s.not_ratchet_traces += c.traces;
      s.false_ratchets += c.ratchet;
      const double rate = static_cast<double>(c.ratchet) / c.traces;
      if (rate > s.worst_false_ratchet_rate) {
        s.worst_false_ratchet_rate = rate;
        s.worst_false_ratchet_class = e.trace_class.name;
      }
    } else if (e.trace_class.truth == TraceTruth::kRatchet) {
      const int missed = c.traces - c.ratchet;
      s.ratchet_traces += c.traces;
      s.missed_ratchets += missed;
      const double rate = static_cast<double>(missed) / c.traces;
      if (rate > s.worst_missed_ratchet_rate) {
        s.worst_missed_ratchet_rate = rate;
        s.worst_missed_ratchet_class = e.trace_class.name;
      }
    }
  }
  return s;
}

}  // namespace allocguard::memory
