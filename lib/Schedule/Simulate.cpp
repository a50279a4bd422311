//===- Simulate.cpp - a schedule's predicted run --------------------------===//
//
// Runs a checked schedule on per-stage costs: each rank runs its actions in
// order, an action starting when the rank is free and, for a receive, when
// the messages it waits for have arrived (a send's messages arrive one
// transfer time after it starts; sends do not block). Each SEND and RECV
// also takes the rank `message` time, which is not busy time. Gives each rank's
// busy time, the bubble, and the most activations each rank holds at once.
//
//===----------------------------------------------------------------------===//

#include "Peers.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

using namespace pippy::schedule;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Message in flight: (kind, from stage, to stage, micro-batch).
using Message = std::tuple<Op, int, int, int>;

double computeCost(const Action &a, const StageCosts &costs) {
  int s = a.stage;
  auto at = [&](const std::vector<double> &list) {
    return s < static_cast<int>(list.size()) ? list[s] : 0.0;
  };
  switch (a.op) {
  case Op::Forward:
    return at(costs.forward);
  case Op::Backward:
    return at(costs.backward);
  case Op::BackwardInput:
    return at(costs.backward) - at(costs.weight);
  case Op::BackwardWeight:
    return at(costs.weight);
  default:
    return 0;
  }
}

class CostSimulation {
public:
  CostSimulation(const Schedule &schedule, const Topology &topo,
                 const StageCosts &costs)
      : schedule(schedule), peers(schedule, topo), costs(costs),
        R(schedule.numRanks()), pc(R, 0), clock(R, 0), inflight(R, 0),
        bytes(R, 0) {
    sim.busy.assign(R, 0);
    sim.peakInflight.assign(R, 0);
    sim.peakActivationBytes.assign(R, 0);
    sim.times.resize(R);
  }

  Simulation run();

private:
  /// The time rank `r`'s next action can start, if it can.
  std::optional<double> startOf(int r, const Action &a);
  void finish(int r, const Action &a, double start);

  const Schedule &schedule;
  Peers peers;
  const StageCosts &costs;
  int R;
  std::vector<size_t> pc;
  std::vector<double> clock;
  std::vector<int> inflight;
  std::vector<double> bytes;
  std::map<Message, double> arrival;
  std::map<int, double> collectiveArrival; ///< rank -> when it reached it
  Simulation sim;
};

Simulation CostSimulation::run() {
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < R; ++r)
      while (pc[r] < schedule.ranks[r].size()) {
        const Action &a = schedule.ranks[r][pc[r]];
        std::optional<double> start = startOf(r, a);
        if (!start)
          break;
        finish(r, a, *start);
        ++pc[r];
        progress = true;
      }
  }
  double total = 0;
  for (int r = 0; r < R; ++r) {
    sim.makespan = std::max(sim.makespan, clock[r]);
    total += sim.busy[r];
  }
  if (sim.makespan > 0)
    sim.bubbleFraction = 1 - total / (R * sim.makespan);
  return std::move(sim);
}

std::optional<double> CostSimulation::startOf(int r, const Action &a) {
  double start = clock[r];
  int s = a.stage, m = a.microbatch;
  auto await = [&](Op op, const std::vector<int> &from) {
    for (int p : from) {
      auto it = arrival.find({op, p, s, m});
      if (it == arrival.end())
        return false;
      start = std::max(start, it->second);
    }
    return true;
  };
  if (a.op == Op::RecvF && !await(Op::SendF, peers.remoteIn[s]))
    return std::nullopt;
  if (a.op == Op::RecvB && !await(Op::SendB, peers.remoteOut[s]))
    return std::nullopt;
  if (a.op == Op::AllReduceTied) {
    collectiveArrival.emplace(r, clock[r]);
    for (int p : peers.tiedRanks[r]) {
      auto it = collectiveArrival.find(p);
      if (it == collectiveArrival.end())
        return std::nullopt;
      start = std::max(start, it->second);
    }
  }
  return start;
}

void CostSimulation::finish(int r, const Action &a, double start) {
  int s = a.stage, m = a.microbatch;
  double cost = computeCost(a, costs);
  double held = s < static_cast<int>(costs.activations.size())
                    ? costs.activations[s]
                    : 0.0;
  if (a.op == Op::Forward) {
    sim.peakInflight[r] = std::max(sim.peakInflight[r], ++inflight[r]);
    bytes[r] += held;
    sim.peakActivationBytes[r] = std::max(sim.peakActivationBytes[r], bytes[r]);
  } else if (a.op == Op::Backward || a.op == Op::BackwardWeight) {
    --inflight[r];
    bytes[r] -= held;
  } else if (a.op == Op::SendF) {
    for (int c : peers.remoteOut[s])
      arrival[{Op::SendF, s, c, m}] = start + costs.transfer;
  } else if (a.op == Op::SendB) {
    for (int p : peers.remoteIn[s])
      arrival[{Op::SendB, s, p, m}] = start + costs.transfer;
  }
  if (a.isCompute())
    sim.times[r].push_back({start, start + cost});
  sim.busy[r] += cost;
  bool message = a.op == Op::SendF || a.op == Op::SendB || a.op == Op::RecvF ||
                 a.op == Op::RecvB;
  clock[r] = start + cost + (message ? costs.message : 0);
}

} // namespace

llvm::Error pippy::schedule::readStageCosts(llvm::StringRef json, int numStages,
                                            StageCosts &costs) {
  llvm::Expected<llvm::json::Value> root = llvm::json::parse(json);
  if (!root)
    return root.takeError();
  const llvm::json::Object *object = root->getAsObject();
  if (!object)
    return error("the costs must be a JSON object");
  for (auto [key, field] : {std::pair{"forward", &costs.forward},
                            std::pair{"backward", &costs.backward},
                            std::pair{"weight", &costs.weight}}) {
    const llvm::json::Value *value = object->get(key);
    if (!value)
      continue;
    const llvm::json::Array *list = value->getAsArray();
    if (!list || static_cast<int>(list->size()) != numStages)
      return error(llvm::Twine("costs: '") + key + "' must list " +
                   llvm::Twine(numStages) + " numbers, one per stage");
    field->clear();
    for (const llvm::json::Value &v : *list) {
      std::optional<double> number = v.getAsNumber();
      if (!number || *number < 0)
        return error(llvm::Twine("costs: '") + key +
                     "' holds something other than a time");
      field->push_back(*number);
    }
  }
  for (auto [key, field] : {std::pair{"message", &costs.message},
                            std::pair{"transfer", &costs.transfer}})
    if (const llvm::json::Value *value = object->get(key)) {
      std::optional<double> number = value->getAsNumber();
      if (!number || *number < 0)
        return error(llvm::Twine("costs: '") + key + "' must be a time");
      *field = *number;
    }
  return llvm::Error::success();
}

Simulation pippy::schedule::simulate(const Schedule &schedule,
                                     const Topology &topo,
                                     const StageCosts &costs) {
  return CostSimulation(schedule, topo, costs).run();
}

std::string pippy::schedule::renderTimeline(const Schedule &schedule,
                                            const Simulation &sim,
                                            double unit) {
  int slots = static_cast<int>(std::ceil(sim.makespan / unit - 1e-9));
  std::vector<std::vector<std::string>> grid(schedule.numRanks());
  size_t width = 1;
  for (int r = 0; r < schedule.numRanks(); ++r) {
    grid[r].assign(slots, ".");
    size_t k = 0;
    for (const Action &a : schedule.ranks[r]) {
      if (!a.isCompute())
        continue;
      auto [start, end] = sim.times[r][k++];
      for (int t = static_cast<int>(std::floor(start / unit + 1e-9));
           t < slots && (t + 0.5) * unit < end; ++t)
        grid[r][t] = a.str();
      width = std::max(width, a.str().size());
    }
  }
  std::string text;
  for (int r = 0; r < schedule.numRanks(); ++r) {
    std::string line = "rank" + std::to_string(r);
    for (const std::string &cell : grid[r])
      line += " " + cell + std::string(width - cell.size(), ' ');
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    text += line + "\n";
  }
  return text;
}
