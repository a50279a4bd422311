//===- Simulate.cpp - a schedule's predicted run --------------------------===//
//
// Runs a checked schedule on per-stage costs: each rank runs its actions in
// order, an action starting when the rank is free and, for a receive, when
// the messages it waits for have arrived (a send's messages arrive one
// transfer time after it starts; sends do not block). Each SEND and RECV
// also takes the rank `message` time, which is not busy time. With
// `holdWeightGradients`, a B runs as pippy-run runs it (HeldGradients below).
// Gives each rank's busy time, the bubble, its compute boxes and the most
// activations each rank holds at once.
//
//===----------------------------------------------------------------------===//

#include "Peers.h"

#include "pippy/Executable/WaitFill.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <tuple>

using namespace pippy::schedule;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Message in flight: (kind, from stage, to stage, micro-batch).
using Message = std::tuple<Op, int, int, int>;

double computeCost(const Action &a, const StageCosts &costs) {
  if (auto it = costs.actions.find(a.str()); it != costs.actions.end())
    return it->second;
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
  case Op::Step:
    return at(costs.step);
  default:
    return 0;
  }
}

/// pippy-run's held weight gradients (runtime/Backward.cpp, Executor.cpp):
/// on a rank without I actions, a B of a stage that sends its input
/// gradients to another rank computes those first and holds its weight
/// gradients. Before a F, B, I or RECV the rank computes the held ones of
/// all but the newest micro-batch, and after a SEND_B too; before any other
/// action but a SEND, all of them.
struct HeldGradients {
  struct Held {
    Action action;
    double cost;
  };
  std::vector<std::deque<Held>> ranks;
  std::vector<bool> splits; ///< per rank, whether it has I or deferred W

  HeldGradients(const Schedule &schedule) : ranks(schedule.numRanks()) {
    for (const std::vector<Action> &actions : schedule.ranks)
      splits.push_back(llvm::any_of(actions, [](const Action &b) {
        return b.op == Op::BackwardInput || b.op == Op::Weight;
      }));
  }
  bool holds(const Peers &peers, const StageCosts &costs, int r,
             const Action &a) const {
    return costs.holdWeightGradients && a.op == Op::Backward && !splits[r] &&
           !peers.remoteIn[a.stage].empty();
  }
  /// How many micro-batches' held gradients may stay before `op` runs.
  static size_t keepBefore(Op op) {
    switch (op) {
    case Op::SendF:
    case Op::SendB:
      return SIZE_MAX;
    case Op::Forward:
    case Op::Backward:
    case Op::BackwardInput:
    case Op::RecvF:
    case Op::RecvB:
      return 1;
    default:
      return 0;
    }
  }
};

class CostSimulation {
public:
  CostSimulation(const Schedule &schedule, const Topology &topo,
                 const StageCosts &costs)
      : schedule(schedule), peers(schedule, topo), costs(costs),
        R(schedule.numRanks()), pc(R, 0), clock(R, 0), inflight(R, 0),
        bytes(R, 0), held(schedule) {
    for (const std::vector<Action> &actions : schedule.ranks) {
      std::vector<pippy::exe::WaitFill::Step> steps;
      std::set<int> held;
      bool tied = false;
      for (const Action &a : actions) {
        steps.push_back({a.op, a.stage, a.microbatch});
        held.insert(a.stage);
        tied |= a.op == Op::AllReduceTied;
      }
      early.emplace_back(steps);
      stepsAlone.push_back(held.size() > 1 && !tied);
    }
    sim.busy.assign(R, 0);
    sim.peakInflight.assign(R, 0);
    sim.peakActivationBytes.assign(R, 0);
    sim.boxes.resize(R);
  }

  Simulation run();

private:
  /// The time rank `r`'s next action can start, if it can.
  std::optional<double> startOf(int r, const Action &a);
  void finish(int r, const Action &a, double start);
  /// Computes rank `r`'s held weight gradients, oldest first, until at
  /// most `keep` micro-batches' remain.
  void computeHeld(int r, size_t keep);
  /// With fillWaits: rank `r`, whose next action waits until `until`,
  /// computes W's of its list early meanwhile.
  void fillWait(int r, double until);
  /// With fillForwards: rank `r` runs a later F whose input has come, if
  /// its micro-batches in flight stay within the budget; whether it did.
  bool fillForward(int r);

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
  HeldGradients held;
  std::vector<pippy::exe::WaitFill> early; ///< per rank (fillWaits)
  /// Per rank, whether its stages step alone: it holds several and no tied
  /// weights (runtime/OptimizerStep.cpp).
  std::vector<bool> stepsAlone;
  Simulation sim;
};

Simulation CostSimulation::run() {
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < R; ++r)
      while (pc[r] < schedule.ranks[r].size()) {
        if (early[r].wasRunEarly(pc[r])) {
          ++pc[r];
          continue;
        }
        const Action &a = schedule.ranks[r][pc[r]];
        computeHeld(r, HeldGradients::keepBefore(a.op));
        std::optional<double> start = startOf(r, a);
        if (!start)
          break;
        if (a.op == Op::RecvF || a.op == Op::RecvB)
          fillWait(r, *start);
        finish(r, a, std::max(*start, clock[r]));
        ++pc[r];
        progress = true;
      }
  }
  double total = 0;
  for (int r = 0; r < R; ++r) {
    computeHeld(r, 0);
    sim.makespan = std::max(sim.makespan, clock[r]);
    total += sim.busy[r];
  }
  if (sim.makespan > 0)
    sim.bubbleFraction = 1 - total / (R * sim.makespan);
  return std::move(sim);
}

void CostSimulation::fillWait(int r, double until) {
  while (costs.fillWaits && clock[r] < until) {
    std::optional<size_t> work = early[r].pick(pc[r]);
    if (!work && stepsAlone[r])
      work = early[r].pickStep(pc[r]);
    if (!work) {
      if (costs.fillForwards == 0 || !fillForward(r))
        return;
      continue;
    }
    finish(r, schedule.ranks[r][*work], clock[r]);
    early[r].ranEarly(*work);
  }
}

bool CostSimulation::fillForward(int r) {
  if (early[r].forwardsAhead(pc[r]) >= costs.fillForwards)
    return false;
  auto pick = early[r].pickForward(pc[r], [&](size_t i) {
    std::optional<double> start = startOf(r, schedule.ranks[r][i]);
    return start && *start <= clock[r];
  });
  if (!pick)
    return false;
  for (std::optional<size_t> i : {pick->second, std::optional(pick->first)})
    if (i) {
      finish(r, schedule.ranks[r][*i], clock[r]);
      early[r].ranEarly(*i);
    }
  return true;
}

void CostSimulation::computeHeld(int r, size_t keep) {
  while (held.ranks[r].size() > keep) {
    const HeldGradients::Held &h = held.ranks[r].front();
    sim.boxes[r].push_back({clock[r], clock[r] + h.cost, h.action});
    sim.busy[r] += h.cost;
    clock[r] += h.cost;
    held.ranks[r].pop_front();
  }
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
  double activation = s < static_cast<int>(costs.activations.size())
                          ? costs.activations[s]
                          : 0.0;
  if (a.op == Op::Forward) {
    sim.peakInflight[r] = std::max(sim.peakInflight[r], ++inflight[r]);
    bytes[r] += activation;
    sim.peakActivationBytes[r] = std::max(sim.peakActivationBytes[r], bytes[r]);
  } else if (a.op == Op::Backward || a.op == Op::BackwardWeight) {
    --inflight[r];
    bytes[r] -= activation;
  } else if (a.op == Op::SendF) {
    for (int c : peers.remoteOut[s])
      arrival[{Op::SendF, s, c, m}] = start + costs.transfer;
  } else if (a.op == Op::SendB) {
    for (int p : peers.remoteIn[s])
      arrival[{Op::SendB, s, p, m}] = start + costs.transfer;
  }
  if (held.holds(peers, costs, r, a)) {
    auto it = costs.held.find(a.str());
    double weight = it != costs.held.end() ? it->second
                    : s < static_cast<int>(costs.weight.size())
                        ? costs.weight[s]
                        : 0.0;
    weight = std::min(cost, weight);
    held.ranks[r].push_back({a, weight});
    cost -= weight;
  }
  if (a.isCompute())
    sim.boxes[r].push_back({start, start + cost, a});
  sim.busy[r] += cost;
  bool message = a.op == Op::SendF || a.op == Op::SendB || a.op == Op::RecvF ||
                 a.op == Op::RecvB;
  clock[r] = start + cost + (message ? costs.message : 0);
  if (a.op == Op::SendB)
    computeHeld(r, 1);
}

/// A time in a costs file: a number from 0 to 1e200 (larger ones would
/// overflow the simulation's sums).
std::optional<double> timeOf(const llvm::json::Value &value) {
  std::optional<double> number = value.getAsNumber();
  if (!number || !(*number >= 0 && *number <= 1e200))
    return std::nullopt;
  return number;
}

std::string timeText(double time) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", time);
  return text;
}

/// What a costs file may not say, once read over the costs it replaces: a
/// stage's weight gradients (W) costing more than its whole backward (B),
/// which includes them, or an action of a stage the pipeline lacks.
llvm::Error checkCosts(const StageCosts &costs, int numStages) {
  for (int s = 0; s < numStages; ++s)
    if (s < static_cast<int>(costs.weight.size()) &&
        s < static_cast<int>(costs.backward.size()) &&
        costs.weight[s] > costs.backward[s])
      return error("costs: stage " + llvm::Twine(s) + "'s 'weight' (" +
                   timeText(costs.weight[s]) +
                   ") is more than its 'backward' (" +
                   timeText(costs.backward[s]) + "), which includes it");
  for (const auto *map : {&costs.actions, &costs.held})
    for (const auto &[name, time] : *map)
      if (std::optional<Action> a = parseAction(name);
          a && a->stage >= numStages)
        return error("costs: '" + name + "' names stage " +
                     llvm::Twine(a->stage) + "; the pipeline has stages 0.." +
                     llvm::Twine(numStages - 1));
  return llvm::Error::success();
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
  for (auto [key, field] :
       {std::pair{"forward", &costs.forward},
        std::pair{"backward", &costs.backward},
        std::pair{"weight", &costs.weight}, std::pair{"step", &costs.step}}) {
    const llvm::json::Value *value = object->get(key);
    if (!value)
      continue;
    const llvm::json::Array *list = value->getAsArray();
    if (!list || static_cast<int>(list->size()) != numStages)
      return error(llvm::Twine("costs: '") + key + "' must list " +
                   llvm::Twine(numStages) + " numbers, one per stage");
    field->clear();
    for (const llvm::json::Value &v : *list) {
      std::optional<double> number = timeOf(v);
      if (!number)
        return error(llvm::Twine("costs: '") + key +
                     "' holds something other than a time");
      field->push_back(*number);
    }
  }
  for (auto [key, field] : {std::pair{"message", &costs.message},
                            std::pair{"transfer", &costs.transfer}})
    if (const llvm::json::Value *value = object->get(key)) {
      std::optional<double> number = timeOf(*value);
      if (!number)
        return error(llvm::Twine("costs: '") + key + "' must be a time");
      *field = *number;
    }
  for (auto [key, field] :
       {std::pair{"actions", &costs.actions}, std::pair{"held", &costs.held}})
    if (const llvm::json::Value *value = object->get(key)) {
      const llvm::json::Object *map = value->getAsObject();
      if (!map)
        return error(llvm::Twine("costs: '") + key +
                     "' must map actions to times");
      for (const auto &[name, time] : *map) {
        std::optional<Action> action = parseAction(name);
        std::optional<double> number = timeOf(time);
        if (!action || !number)
          return error(llvm::Twine("costs: '") + key + "': '" + name.str() +
                       "' must be an action with a time");
        (*field)[action->str()] = *number;
      }
    }
  for (auto [key, field] :
       {std::pair{"hold_weight_gradients", &costs.holdWeightGradients},
        std::pair{"fill_waits", &costs.fillWaits}})
    if (const llvm::json::Value *value = object->get(key)) {
      std::optional<bool> on = value->getAsBoolean();
      if (!on)
        return error(llvm::Twine("costs: '") + key + "' must be true or false");
      *field = *on;
    }
  if (const llvm::json::Value *value = object->get("fill_forwards")) {
    std::optional<int64_t> n = value->getAsInteger();
    if (!n || *n < 0 || *n > 1000000)
      return error("costs: 'fill_forwards' must be a count of micro-batches");
    costs.fillForwards = static_cast<int>(*n);
  }
  return checkCosts(costs, numStages);
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
    for (const SimulatedBox &box : sim.boxes[r]) {
      for (int t = static_cast<int>(std::floor(box.start / unit + 1e-9));
           t < slots && (t + 0.5) * unit < box.end; ++t)
        grid[r][t] = box.action.str();
      width = std::max(width, box.action.str().size());
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
