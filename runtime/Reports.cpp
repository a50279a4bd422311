//===- Reports.cpp - the metrics and trace files of a run -----------------===//

#include "Reports.h"

#include "pippy/Runtime/Program.h"
#include "pippy/Support/AtomicFile.h"

#include <nlohmann/json.hpp>

namespace pippy::rt {

using nlohmann::json;

namespace {
std::string dump(const json &value) {
  return value.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}
} // namespace

std::string metricsJson(const RunMetrics &metrics) {
  json steps = json::array();
  for (const StepMetrics &s : metrics.steps)
    steps.push_back({{"step", s.step},
                     {"loss", s.loss},
                     {"step_time_s", s.stepSeconds},
                     {"samples_per_s", s.samplesPerSecond},
                     {"rank_step_time_s", s.rankStepSeconds},
                     {"rank_busy_s", s.rankBusySeconds}});
  json coordinates = json::array();
  for (int r = 0; r < metrics.mesh.worldSize(); ++r) {
    Mesh::Coordinates c = metrics.mesh.of(r);
    coordinates.push_back(
        {{"replica", c.replica}, {"pipeline_rank", c.pipelineRank}});
  }
  json result = {{"steps", std::move(steps)},
                 {"bubble_fraction", metrics.bubbleFraction},
                 {"peak_inflight_microbatches", metrics.peakInflight},
                 {"peak_activation_bytes", metrics.peakActivationBytes},
                 {"busy_s", metrics.busySeconds},
                 {"schedule", metrics.schedule},
                 {"dtype", metrics.dtype},
                 {"ranks", metrics.ranks},
                 {"optimizer_state_bytes", metrics.optimizerStateBytes},
                 {"mesh",
                  {{"dp", metrics.mesh.dp},
                   {"pp", metrics.mesh.pp},
                   {"ranks", std::move(coordinates)}}}};
  if (!metrics.peakDeviceBytes.empty())
    result["peak_device_memory_bytes"] = metrics.peakDeviceBytes;
  if (metrics.mesh.dp > 1) {
    result["dp_allreduce_bytes_per_step"] = metrics.dpReducedBytesPerStep;
    result["gradient_bytes"] = metrics.gradientBytes;
    result["dp_wait_s"] = metrics.dpWaitSeconds;
  }
  return dump(result);
}

std::string traceEventsJson(int rank, const std::vector<TraceEvent> &events) {
  json list = json::array();
  for (const TraceEvent &e : events) {
    json event = {{"name", e.name}, {"ph", "X"},     {"pid", rank},
                  {"tid", 0},       {"ts", e.start}, {"dur", e.duration}};
    if (e.step > 0)
      event["args"] = {{"step", e.step}};
    list.push_back(std::move(event));
  }
  return list.dump();
}

std::string mergeTrace(const std::vector<std::string> &parts,
                       const std::vector<std::vector<int>> &stagesOfRank) {
  json merged = json::array();
  for (size_t r = 0; r < parts.size(); ++r) {
    const std::vector<int> &stages = stagesOfRank.at(r);
    std::string label = stages.size() == 1 ? " (stage " : " (stages ";
    for (size_t i = 0; i < stages.size(); ++i)
      label += (i ? ", " : "") + std::to_string(stages[i]);
    merged.push_back(
        {{"name", "process_name"},
         {"ph", "M"},
         {"pid", r},
         {"args", {{"name", "rank " + std::to_string(r) + label + ")"}}}});
    json part = json::parse(parts[r], nullptr, /*allow_exceptions=*/false);
    if (!part.is_array())
      throw RuntimeError("rank " + std::to_string(r) +
                         " sent a malformed trace");
    for (json &event : part)
      merged.push_back(std::move(event));
  }
  return dump({{"traceEvents", std::move(merged)}, {"displayTimeUnit", "ms"}});
}

void writeTextFile(const std::string &path, const std::string &text) {
  if (std::string error = writeFileAtomically(path, text); !error.empty())
    throw RuntimeError(error);
}

} // namespace pippy::rt
