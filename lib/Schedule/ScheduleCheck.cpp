//===- ScheduleCheck.cpp - schedule checker and simulator -----------------===//
//
// `check` runs the per-rank rules on each action list, then simulates the
// schedule tick by tick to find deadlocks and messages never received.
// `simulate` runs it with per-stage costs for the makespan and the bubble.
//
//===----------------------------------------------------------------------===//

#include "pippy/Schedule/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

using namespace pippy::schedule;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The rank-by-step grid of a simulated run: cell [r][t] is the action rank
/// r completed at tick t, empty when it waited.
using Grid = std::vector<std::vector<std::string>>;

std::string renderGrid(const Grid &grid) {
  size_t ticks = 0, width = 1;
  for (const auto &row : grid) {
    ticks = std::max(ticks, row.size());
    for (const std::string &cell : row)
      width = std::max(width, cell.size());
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "       ";
  for (size_t t = 0; t < ticks; ++t)
    os << " " << llvm::left_justify(std::to_string(t), width);
  os << "\n";
  for (size_t r = 0; r < grid.size(); ++r) {
    os << "  rank" << llvm::left_justify(std::to_string(r), 2);
    for (size_t t = 0; t < ticks; ++t) {
      std::string cell = t < grid[r].size() ? grid[r][t] : "";
      os << " " << llvm::left_justify(cell.empty() ? "." : cell, width);
    }
    os << "\n";
  }
  os.flush();
  if (!text.empty() && text.back() == '\n')
    text.pop_back();
  return text;
}

/// The per-rank rules every action list must satisfy, checked before the
/// simulation: each micro-batch is forwarded (and backwarded) once, and each
/// action comes after the ones it depends on.
class RankChecker {
public:
  RankChecker(const Schedule &schedule, const Topology &topo, int r)
      : schedule(schedule), topo(topo), r(r), list(schedule.ranks[r]),
        M(schedule.microbatches), hasProducers(!topo.producers[r].empty()),
        hasConsumers(!topo.consumers(r).empty()) {}

  llvm::Error check();

private:
  std::string where(size_t i) const;
  llvm::Error checkAllowed(size_t i) const;
  llvm::Error checkOrder(size_t i) const;
  llvm::Error requireBefore(size_t i, Op op, int m) const;
  llvm::Error checkComplete();
  llvm::Error missing(Op op, int m) const;

  const Schedule &schedule;
  const Topology &topo;
  int r;
  const std::vector<Action> &list;
  int M;
  bool hasProducers;
  bool hasConsumers;
  std::map<std::pair<Op, int>, int> position;
};

llvm::Error RankChecker::check() {
  for (size_t i = 0; i < list.size(); ++i) {
    if (llvm::Error err = checkAllowed(i))
      return err;
    const Action &a = list[i];
    auto key = std::make_pair(a.op, a.hasMicrobatch() ? a.microbatch : 0);
    if (a.op == Op::Weight)
      continue; // any number, anywhere before STEP
    if (position.count(key))
      return error("action " + a.str() + " appears twice\n" + where(i));
    position[key] = static_cast<int>(i);
    if (llvm::Error err = checkOrder(i))
      return err;
  }
  return checkComplete();
}

/// The rank's actions with the `i`th marked.
std::string RankChecker::where(size_t i) const {
  std::string text = "rank" + std::to_string(r) + ":";
  for (size_t j = 0; j < list.size(); ++j)
    text += (j == i ? " >>" + list[j].str() + "<<" : " " + list[j].str());
  return text;
}

/// Whether action `i` may appear on this rank at all.
llvm::Error RankChecker::checkAllowed(size_t i) const {
  const Action &a = list[i];
  if (a.stage != r)
    return error("action " + a.str() + " is on rank " + llvm::Twine(r) +
                 ", which runs stage " + llvm::Twine(r) + "\n" + where(i));
  if (a.hasMicrobatch() && (a.microbatch < 0 || a.microbatch >= M))
    return error("action " + a.str() + " names a micro-batch outside 0.." +
                 llvm::Twine(M - 1) + "\n" + where(i));
  bool backwardOnly = a.op == Op::Backward || a.op == Op::SendB ||
                      a.op == Op::RecvB || a.op == Op::AllReduceTied ||
                      a.op == Op::Step || a.op == Op::Weight;
  if (!schedule.training && backwardOnly)
    return error("action " + a.str() + " in a forward-only schedule\n" +
                 where(i));
  if ((a.op == Op::RecvF || a.op == Op::SendB) && !hasProducers)
    return error("action " + a.str() + ": stage " + llvm::Twine(r) +
                 " receives no activations\n" + where(i));
  if ((a.op == Op::SendF || a.op == Op::RecvB) && !hasConsumers)
    return error("action " + a.str() + ": stage " + llvm::Twine(r) +
                 " sends no activations\n" + where(i));
  if (a.op == Op::AllReduceTied && !topo.isTied(r))
    return error("action " + a.str() + ": stage " + llvm::Twine(r) +
                 " has no tied weights\n" + where(i));
  return llvm::Error::success();
}

/// Whether action `i` comes after the actions it depends on.
llvm::Error RankChecker::checkOrder(size_t i) const {
  const Action &a = list[i];
  int m = a.microbatch;
  llvm::Error err = llvm::Error::success();
  switch (a.op) {
  case Op::Forward:
    if (hasProducers)
      err = requireBefore(i, Op::RecvF, m);
    break;
  case Op::SendF:
    err = requireBefore(i, Op::Forward, m);
    break;
  case Op::Backward:
    err = requireBefore(i, Op::Forward, m);
    if (!err && hasConsumers)
      err = requireBefore(i, Op::RecvB, m);
    break;
  case Op::SendB:
    err = requireBefore(i, Op::Backward, m);
    break;
  case Op::AllReduceTied:
  case Op::Step:
    for (int k = 0; k < M && !err; ++k)
      err = requireBefore(i, Op::Backward, k);
    if (!err && a.op == Op::Step && topo.isTied(r))
      err = requireBefore(i, Op::AllReduceTied, 0);
    break;
  default:
    break;
  }
  return err;
}

llvm::Error RankChecker::requireBefore(size_t i, Op op, int m) const {
  auto it = position.find({op, m});
  if (it != position.end())
    return llvm::Error::success();
  return error("action " + list[i].str() + " comes before " +
               Action{op, r, m}.str() + ", which it needs\n" + where(i));
}

/// Whether every micro-batch runs all it must on this rank, and STEP ends.
llvm::Error RankChecker::checkComplete() {
  for (int m = 0; m < M; ++m) {
    std::vector<Op> needed = {Op::Forward};
    if (hasProducers)
      needed.push_back(Op::RecvF);
    if (hasConsumers)
      needed.push_back(Op::SendF);
    if (schedule.training) {
      needed.push_back(Op::Backward);
      if (hasProducers)
        needed.push_back(Op::SendB);
      if (hasConsumers)
        needed.push_back(Op::RecvB);
    }
    for (Op op : needed)
      if (!position.count({op, m}))
        return missing(op, m);
  }
  if (schedule.training) {
    if (topo.isTied(r) && !position.count({Op::AllReduceTied, 0}))
      return missing(Op::AllReduceTied, 0);
    if (!position.count({Op::Step, 0}))
      return missing(Op::Step, 0);
    if (list.back().op != Op::Step)
      return error("rank" + llvm::Twine(r) +
                   ": STEP must be the last action\n" +
                   where(position[{Op::Step, 0}]));
  }
  return llvm::Error::success();
}

llvm::Error RankChecker::missing(Op op, int m) const {
  return error("rank" + llvm::Twine(r) + " never runs " +
               Action{op, r, m}.str() + "\n" + where(list.size()));
}

/// Message in flight: (kind, from stage, to stage, micro-batch).
using Message = std::tuple<Op, int, int, int>;

/// Stages whose ALLREDUCE_TIED must meet rank r's.
std::set<int> collectivePeers(const Topology &topo, int r) {
  std::set<int> peers;
  for (const std::vector<int> &group : topo.tiedGroups)
    if (llvm::is_contained(group, r))
      peers.insert(group.begin(), group.end());
  return peers;
}

/// The simulation of `check`, in ticks: at each tick every rank whose next
/// action can run runs it. Sends never block; a receive waits for the sends
/// of every peer; ALLREDUCE_TIED waits until its group has reached it.
class TickSimulation {
public:
  TickSimulation(const Schedule &schedule, const Topology &topo)
      : schedule(schedule), topo(topo), S(topo.numStages), pc(S, 0), grid(S) {}

  llvm::Error run();

private:
  bool ready(int r) const;
  void advance(int r);
  llvm::Error deadlock();

  const Schedule &schedule;
  const Topology &topo;
  int S;
  std::vector<size_t> pc;
  std::multiset<Message> inFlight;
  Grid grid;
};

llvm::Error TickSimulation::run() {
  for (;;) {
    std::vector<int> runnable;
    bool done = true;
    for (int r = 0; r < S; ++r) {
      if (pc[r] >= schedule.ranks[r].size())
        continue;
      done = false;
      if (ready(r))
        runnable.push_back(r);
    }
    if (done)
      break;
    if (runnable.empty())
      return deadlock();
    for (int r = 0; r < S; ++r)
      if (!llvm::is_contained(runnable, r))
        grid[r].push_back("");
    for (int r : runnable)
      advance(r);
  }
  if (!inFlight.empty()) {
    auto [op, from, to, m] = *inFlight.begin();
    return error("stage " + llvm::Twine(from) + " sends " +
                 Action{op, from, m}.str() + " to stage " + llvm::Twine(to) +
                 ", which never receives it\n" + renderGrid(grid));
  }
  return llvm::Error::success();
}

/// Whether rank `r`'s next action can run now.
bool TickSimulation::ready(int r) const {
  const Action &a = schedule.ranks[r][pc[r]];
  switch (a.op) {
  case Op::RecvF:
    return llvm::all_of(topo.producers[r], [&](int p) {
      return inFlight.count({Op::SendF, p, r, a.microbatch}) > 0;
    });
  case Op::RecvB:
    return llvm::all_of(topo.consumers(r), [&](int c) {
      return inFlight.count({Op::SendB, c, r, a.microbatch}) > 0;
    });
  case Op::AllReduceTied:
    for (int p : collectivePeers(topo, r)) {
      bool there = pc[p] < schedule.ranks[p].size() &&
                   schedule.ranks[p][pc[p]].op == Op::AllReduceTied;
      bool past = llvm::any_of(
          llvm::ArrayRef(schedule.ranks[p]).take_front(pc[p]),
          [](const Action &x) { return x.op == Op::AllReduceTied; });
      if (!there && !past)
        return false;
    }
    return true;
  default:
    return true;
  }
}

/// Runs rank `r`'s next action.
void TickSimulation::advance(int r) {
  const Action &a = schedule.ranks[r][pc[r]++];
  grid[r].push_back(a.str());
  int m = a.microbatch;
  if (a.op == Op::SendF)
    for (int c : topo.consumers(r))
      inFlight.insert({Op::SendF, r, c, m});
  if (a.op == Op::SendB)
    for (int p : topo.producers[r])
      inFlight.insert({Op::SendB, r, p, m});
  if (a.op == Op::RecvF)
    for (int p : topo.producers[r])
      inFlight.erase(inFlight.find({Op::SendF, p, r, m}));
  if (a.op == Op::RecvB)
    for (int c : topo.consumers(r))
      inFlight.erase(inFlight.find({Op::SendB, c, r, m}));
}

/// The error when no rank can move, with where each is stuck.
llvm::Error TickSimulation::deadlock() {
  std::string reason;
  for (int r = 0; r < S; ++r) {
    if (pc[r] >= schedule.ranks[r].size())
      continue;
    const Action &a = schedule.ranks[r][pc[r]];
    grid[r].push_back("!" + a.str());
    reason += "\n  rank" + std::to_string(r) + " waits at " + a.str();
  }
  return error("the schedule deadlocks: no rank can move" + reason +
               "\n(! marks where each rank is stuck)\n" + renderGrid(grid));
}

} // namespace

llvm::Error pippy::schedule::check(const Schedule &schedule,
                                   const Topology &topo) {
  int S = topo.numStages;
  if (static_cast<int>(schedule.ranks.size()) != S)
    return error("the schedule has " + llvm::Twine(schedule.ranks.size()) +
                 " ranks but the pipeline has " + llvm::Twine(S) +
                 " stages (one stage per rank)");
  for (int r = 0; r < S; ++r)
    if (llvm::Error err = RankChecker(schedule, topo, r).check())
      return err;
  return TickSimulation(schedule, topo).run();
}

Simulation pippy::schedule::simulate(const Schedule &schedule,
                                     const Topology &topo,
                                     llvm::ArrayRef<double> forwardCost,
                                     llvm::ArrayRef<double> backwardCost,
                                     double transferCost) {
  int S = topo.numStages;
  Simulation sim;
  sim.busy.assign(S, 0);
  sim.peakInflight.assign(S, 0);
  std::vector<size_t> pc(S, 0);
  std::vector<double> clock(S, 0);
  std::vector<int> inflight(S, 0);
  std::map<Message, double> arrival;
  std::map<int, double> collectiveArrival; // rank -> time it reached it
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < S; ++r) {
      while (pc[r] < schedule.ranks[r].size()) {
        const Action &a = schedule.ranks[r][pc[r]];
        int m = a.microbatch;
        double start = clock[r];
        bool blocked = false;
        auto await = [&](Op op, const std::vector<int> &peers) {
          for (int p : peers) {
            auto it = arrival.find({op, p, r, m});
            if (it == arrival.end()) {
              blocked = true;
              return;
            }
            start = std::max(start, it->second);
          }
        };
        if (a.op == Op::RecvF)
          await(Op::SendF, topo.producers[r]);
        else if (a.op == Op::RecvB)
          await(Op::SendB, topo.consumers(r));
        else if (a.op == Op::AllReduceTied) {
          collectiveArrival.emplace(r, clock[r]);
          for (int p : collectivePeers(topo, r)) {
            auto it = collectiveArrival.find(p);
            if (it == collectiveArrival.end()) {
              blocked = true;
              break;
            }
            start = std::max(start, it->second);
          }
        }
        if (blocked)
          break;
        double cost = 0;
        if (a.op == Op::Forward) {
          cost = forwardCost[r];
          sim.peakInflight[r] = std::max(sim.peakInflight[r], ++inflight[r]);
        } else if (a.op == Op::Backward) {
          cost = backwardCost[r];
          --inflight[r];
        } else if (a.op == Op::SendF) {
          for (int c : topo.consumers(r))
            arrival[{Op::SendF, r, c, m}] = start + transferCost;
        } else if (a.op == Op::SendB) {
          for (int p : topo.producers[r])
            arrival[{Op::SendB, r, p, m}] = start + transferCost;
        }
        sim.busy[r] += cost;
        clock[r] = start + cost;
        ++pc[r];
        progress = true;
      }
    }
  }
  double total = 0;
  for (int r = 0; r < S; ++r) {
    sim.makespan = std::max(sim.makespan, clock[r]);
    total += sim.busy[r];
  }
  if (sim.makespan > 0)
    sim.bubbleFraction = 1 - total / (S * sim.makespan);
  return sim;
}
