//===- ScheduleCheck.cpp - schedule checker and simulator -----------------===//
//
// `check` runs the per-rank rules on each action list, then simulates the
// schedule tick by tick to find deadlocks and messages never received.
//
//===----------------------------------------------------------------------===//

#include "pippy/Schedule/Schedule.h"

#include "Peers.h"
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
/// simulation: each micro-batch is forwarded (and backwarded) once on each
/// stage the rank holds, and each action comes after the ones it depends
/// on, local hand-overs included.
class RankChecker {
public:
  RankChecker(const Schedule &schedule, const Topology &topo,
              const Peers &peers, int r)
      : schedule(schedule), topo(topo), peers(peers), r(r),
        list(schedule.ranks[r]), M(schedule.microbatches) {}

  llvm::Error check();

private:
  using Key = std::tuple<Op, int, int>; ///< op, stage, micro-batch
  std::string where(size_t i) const;
  llvm::Error checkAllowed(size_t i) const;
  llvm::Error checkOrder(size_t i) const;
  llvm::Error requireBefore(size_t i, Op op, int stage, int m) const;
  llvm::Error requireBackwardBefore(size_t i, int stage, int m) const;
  llvm::Error requireGradientsBefore(size_t i, int stage) const;
  llvm::Error checkComplete(int stage) const;
  llvm::Error checkStepsLast() const;
  llvm::Error missing(Op op, int stage, int m) const;
  bool has(Op op, int stage, int m) const {
    return position.count({op, stage, m}) > 0;
  }
  bool allReducedBefore() const {
    return llvm::any_of(position, [](const auto &entry) {
      return std::get<0>(entry.first) == Op::AllReduceTied;
    });
  }

  const Schedule &schedule;
  const Topology &topo;
  const Peers &peers;
  int r;
  const std::vector<Action> &list;
  int M;
  std::map<Key, int> position;
};

llvm::Error RankChecker::check() {
  for (size_t i = 0; i < list.size(); ++i) {
    if (llvm::Error err = checkAllowed(i))
      return err;
    const Action &a = list[i];
    if (a.op == Op::Weight)
      continue; // any number, anywhere before STEP
    Key key{a.op, a.stage, a.hasMicrobatch() ? a.microbatch : 0};
    if (position.count(key))
      return error("action " + a.str() + " appears twice\n" + where(i));
    if (a.op == Op::AllReduceTied && allReducedBefore())
      return error("rank" + llvm::Twine(r) +
                   " has two ALLREDUCE_TIED; one sums every tied group it "
                   "holds\n" +
                   where(i));
    Op other = a.op == Op::Backward ? Op::BackwardInput : Op::Backward;
    if ((a.op == Op::Backward || a.op == Op::BackwardInput) &&
        has(other, a.stage, a.microbatch))
      return error("action " + a.str() + ": micro-batch " +
                   llvm::Twine(a.microbatch) + " of stage " +
                   llvm::Twine(a.stage) +
                   " is backwarded both whole (B) and split (I)\n" + where(i));
    position[key] = static_cast<int>(i);
    if (llvm::Error err = checkOrder(i))
      return err;
  }
  for (int s : schedule.stagesOf(r))
    if (llvm::Error err = checkComplete(s))
      return err;
  return checkStepsLast();
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
  int s = a.stage;
  if (s < 0 || s >= topo.numStages)
    return error("action " + a.str() + " names a stage outside 0.." +
                 llvm::Twine(topo.numStages - 1) + "\n" + where(i));
  if (schedule.stageRank[s] != r)
    return error("action " + a.str() + " is on rank " + llvm::Twine(r) +
                 ", but stage " + llvm::Twine(s) + " is on rank " +
                 llvm::Twine(schedule.stageRank[s]) + "\n" + where(i));
  if (a.hasMicrobatch() && (a.microbatch < 0 || a.microbatch >= M))
    return error("action " + a.str() + " names a micro-batch outside 0.." +
                 llvm::Twine(M - 1) + "\n" + where(i));
  if (!schedule.training && a.op != Op::Forward && a.op != Op::SendF &&
      a.op != Op::RecvF)
    return error("action " + a.str() + " in a forward-only schedule\n" +
                 where(i));
  bool fromRemote = a.op == Op::RecvF || a.op == Op::SendB;
  if (fromRemote && peers.remoteIn[s].empty())
    return error("action " + a.str() + ": stage " + llvm::Twine(s) +
                 " receives no activations from another rank\n" + where(i));
  bool toRemote = a.op == Op::SendF || a.op == Op::RecvB;
  if (toRemote && peers.remoteOut[s].empty())
    return error("action " + a.str() + ": stage " + llvm::Twine(s) +
                 " sends no activations to another rank\n" + where(i));
  if (a.op == Op::AllReduceTied && !topo.isTied(s))
    return error("action " + a.str() + ": stage " + llvm::Twine(s) +
                 " has no tied weights\n" + where(i));
  return llvm::Error::success();
}

/// Whether action `i` comes after the actions it depends on.
llvm::Error RankChecker::checkOrder(size_t i) const {
  const Action &a = list[i];
  int s = a.stage, m = a.microbatch;
  llvm::Error err = llvm::Error::success();
  switch (a.op) {
  case Op::Forward:
    if (!peers.remoteIn[s].empty())
      err = requireBefore(i, Op::RecvF, s, m);
    for (int p : peers.localIn[s])
      if (!err)
        err = requireBefore(i, Op::Forward, p, m);
    break;
  case Op::SendF:
    err = requireBefore(i, Op::Forward, s, m);
    break;
  case Op::Backward:
  case Op::BackwardInput:
    err = requireBefore(i, Op::Forward, s, m);
    if (!err && !peers.remoteOut[s].empty())
      err = requireBefore(i, Op::RecvB, s, m);
    for (int c : peers.localOut[s])
      if (!err)
        err = requireBackwardBefore(i, c, m);
    break;
  case Op::BackwardWeight:
    err = requireBefore(i, Op::BackwardInput, s, m);
    break;
  case Op::SendB:
    err = requireBackwardBefore(i, s, m);
    break;
  case Op::AllReduceTied:
    for (int t : schedule.stagesOf(r))
      if (!err && topo.isTied(t))
        err = requireGradientsBefore(i, t);
    break;
  case Op::Step:
    err = requireGradientsBefore(i, s);
    if (!err && topo.isTied(s) && !allReducedBefore())
      err = error("action " + a.str() +
                  " comes before this rank's ALLREDUCE_TIED, which it needs\n" +
                  where(i));
    break;
  default:
    break;
  }
  return err;
}

llvm::Error RankChecker::requireBefore(size_t i, Op op, int stage,
                                       int m) const {
  if (has(op, stage, m))
    return llvm::Error::success();
  Action needed{op, stage, m};
  bool later = llvm::any_of(list, [&](const Action &b) { return b == needed; });
  if (!later)
    return error("action " + list[i].str() + " needs " + needed.str() +
                 ", which rank" + llvm::Twine(r) +
                 " never runs; the schedule has " + llvm::Twine(M) +
                 (M == 1 ? " micro-batch\n" : " micro-batches\n") + where(i));
  return error("action " + list[i].str() + " comes before " + needed.str() +
               ", which it needs\n" + where(i));
}

/// Requires micro-batch `m`'s input gradients of `stage` (B or I).
llvm::Error RankChecker::requireBackwardBefore(size_t i, int stage,
                                               int m) const {
  if (has(Op::BackwardInput, stage, m))
    return llvm::Error::success();
  return requireBefore(i, Op::Backward, stage, m);
}

/// Requires every micro-batch's weight gradients of `stage` (B, or I and W).
llvm::Error RankChecker::requireGradientsBefore(size_t i, int stage) const {
  for (int m = 0; m < M; ++m) {
    Op op =
        has(Op::BackwardInput, stage, m) ? Op::BackwardWeight : Op::Backward;
    if (llvm::Error err = requireBefore(i, op, stage, m))
      return err;
  }
  return llvm::Error::success();
}

/// Whether every micro-batch runs all it must on `stage`, and it steps.
llvm::Error RankChecker::checkComplete(int s) const {
  bool remoteIn = !peers.remoteIn[s].empty();
  bool remoteOut = !peers.remoteOut[s].empty();
  for (int m = 0; m < M; ++m) {
    std::vector<Op> needed = {Op::Forward};
    if (remoteIn)
      needed.push_back(Op::RecvF);
    if (remoteOut)
      needed.push_back(Op::SendF);
    if (schedule.training) {
      if (has(Op::BackwardInput, s, m))
        needed.push_back(Op::BackwardWeight);
      else
        needed.push_back(Op::Backward);
      if (remoteIn)
        needed.push_back(Op::SendB);
      if (remoteOut)
        needed.push_back(Op::RecvB);
    }
    for (Op op : needed)
      if (!has(op, s, m))
        return missing(op, s, m);
  }
  if (!schedule.training)
    return llvm::Error::success();
  if (topo.isTied(s) && llvm::none_of(list, [](const Action &a) {
        return a.op == Op::AllReduceTied;
      }))
    return missing(Op::AllReduceTied, s, 0);
  if (!has(Op::Step, s, 0))
    return missing(Op::Step, s, 0);
  return llvm::Error::success();
}

/// Whether the rank's STEPs end its list: nothing of the step may follow.
llvm::Error RankChecker::checkStepsLast() const {
  bool stepped = false;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].op == Op::Step)
      stepped = true;
    else if (stepped)
      return error("rank" + llvm::Twine(r) + ": " + list[i].str() +
                   " comes after a STEP; the STEPs must be the last "
                   "actions\n" +
                   where(i));
  }
  return llvm::Error::success();
}

llvm::Error RankChecker::missing(Op op, int stage, int m) const {
  return error("rank" + llvm::Twine(r) + " never runs " +
               Action{op, stage, m}.str() + "\n" + where(list.size()));
}

/// Message in flight: (kind, from stage, to stage, micro-batch).
using Message = std::tuple<Op, int, int, int>;

/// The simulation of `check`, in ticks: at each tick every rank whose next
/// action can run runs it. Sends never block; a receive waits for the sends
/// of every remote peer; ALLREDUCE_TIED waits until every rank it meets
/// has reached its own.
class TickSimulation {
public:
  TickSimulation(const Schedule &schedule, const Peers &peers)
      : schedule(schedule), peers(peers), R(schedule.numRanks()), pc(R, 0),
        grid(R) {}

  llvm::Error run();

private:
  bool ready(int r) const;
  void advance(int r);
  llvm::Error deadlock();

  const Schedule &schedule;
  const Peers &peers;
  int R;
  std::vector<size_t> pc;
  std::multiset<Message> inFlight;
  Grid grid;
};

llvm::Error TickSimulation::run() {
  for (;;) {
    std::vector<int> runnable;
    bool done = true;
    for (int r = 0; r < R; ++r) {
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
    for (int r = 0; r < R; ++r)
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
  int s = a.stage;
  switch (a.op) {
  case Op::RecvF:
    return llvm::all_of(peers.remoteIn[s], [&](int p) {
      return inFlight.count({Op::SendF, p, s, a.microbatch}) > 0;
    });
  case Op::RecvB:
    return llvm::all_of(peers.remoteOut[s], [&](int c) {
      return inFlight.count({Op::SendB, c, s, a.microbatch}) > 0;
    });
  case Op::AllReduceTied:
    for (int p : peers.tiedRanks[r]) {
      const std::vector<Action> &other = schedule.ranks[p];
      auto isAllReduce = [](const Action &x) {
        return x.op == Op::AllReduceTied;
      };
      bool there = pc[p] < other.size() && isAllReduce(other[pc[p]]);
      bool past =
          llvm::any_of(llvm::ArrayRef(other).take_front(pc[p]), isAllReduce);
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
  int s = a.stage, m = a.microbatch;
  if (a.op == Op::SendF)
    for (int c : peers.remoteOut[s])
      inFlight.insert({Op::SendF, s, c, m});
  if (a.op == Op::SendB)
    for (int p : peers.remoteIn[s])
      inFlight.insert({Op::SendB, s, p, m});
  if (a.op == Op::RecvF)
    for (int p : peers.remoteIn[s])
      inFlight.erase(inFlight.find({Op::SendF, p, s, m}));
  if (a.op == Op::RecvB)
    for (int c : peers.remoteOut[s])
      inFlight.erase(inFlight.find({Op::SendB, c, s, m}));
}

/// The error when no rank can move, with where each is stuck.
llvm::Error TickSimulation::deadlock() {
  std::string reason;
  for (int r = 0; r < R; ++r) {
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
  if (static_cast<int>(schedule.stageRank.size()) != S)
    return error("the schedule places " +
                 llvm::Twine(schedule.stageRank.size()) +
                 " stages but the pipeline has " + llvm::Twine(S));
  for (int s = 0; s < S; ++s)
    if (schedule.stageRank[s] < 0 ||
        schedule.stageRank[s] >= schedule.numRanks())
      return error("stage " + llvm::Twine(s) + " is placed on rank " +
                   llvm::Twine(schedule.stageRank[s]) + " of " +
                   llvm::Twine(schedule.numRanks()));
  for (int r = 0; r < schedule.numRanks(); ++r)
    if (schedule.stagesOf(r).empty())
      return error("rank" + llvm::Twine(r) + " holds no stage");
  Peers peers(schedule, topo);
  for (int r = 0; r < schedule.numRanks(); ++r)
    if (llvm::Error err = RankChecker(schedule, topo, peers, r).check())
      return err;
  return TickSimulation(schedule, peers).run();
}
