//===- Schedule.cpp - schedule generators, checker and simulator ----------===//

#include "pippy/Schedule/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

using namespace pippy::schedule;
using llvm::StringRef;

namespace {

struct OpName {
  Op op;
  StringRef text;
};
// Longest spellings first so that `SEND_F` is not read as `S`...
const OpName opNames[] = {
    {Op::AllReduceTied, "ALLREDUCE_TIED"},
    {Op::SendF, "SEND_F"},
    {Op::RecvF, "RECV_F"},
    {Op::SendB, "SEND_B"},
    {Op::RecvB, "RECV_B"},
    {Op::Step, "STEP"},
    {Op::Weight, "W"},
    {Op::Forward, "F"},
    {Op::Backward, "B"},
};

StringRef opText(Op op) {
  for (const OpName &name : opNames)
    if (name.op == op)
      return name.text;
  return "?";
}

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace

std::string Action::str() const {
  std::string text = std::to_string(stage) + opText(op).str();
  if (hasMicrobatch())
    text += std::to_string(microbatch);
  return text;
}

std::optional<Action> pippy::schedule::parseAction(StringRef text) {
  size_t digits = 0;
  while (digits < text.size() && llvm::isDigit(text[digits]))
    ++digits;
  if (digits == 0)
    return std::nullopt;
  Action action{Op::Forward};
  if (text.take_front(digits).getAsInteger(10, action.stage))
    return std::nullopt;
  StringRef rest = text.drop_front(digits);
  for (const OpName &name : opNames) {
    if (!rest.starts_with(name.text))
      continue;
    action.op = name.op;
    StringRef mb = rest.drop_front(name.text.size());
    if (!action.hasMicrobatch())
      return mb.empty() ? std::optional<Action>(action) : std::nullopt;
    if (mb.empty() || mb.getAsInteger(10, action.microbatch))
      return std::nullopt;
    return action;
  }
  return std::nullopt;
}

Topology Topology::chain(int numStages) {
  Topology topo;
  topo.numStages = numStages;
  topo.producers.resize(numStages);
  for (int s = 1; s < numStages; ++s)
    topo.producers[s].push_back(s - 1);
  return topo;
}

std::vector<int> Topology::consumers(int stage) const {
  std::vector<int> result;
  for (int s = 0; s < numStages; ++s)
    if (llvm::is_contained(producers[s], stage))
      result.push_back(s);
  return result;
}

bool Topology::isTied(int stage) const {
  for (const std::vector<int> &group : tiedGroups)
    if (llvm::is_contained(group, stage))
      return true;
  return false;
}

std::string Schedule::str() const {
  std::string text;
  for (size_t r = 0; r < ranks.size(); ++r) {
    text += "rank" + std::to_string(r) + ":";
    for (const Action &a : ranks[r])
      text += " " + a.str();
    text += "\n";
  }
  return text;
}

llvm::ArrayRef<StringRef> pippy::schedule::kinds() {
  static const StringRef names[] = {"gpipe", "1f1b"};
  return names;
}

llvm::Expected<Schedule>
pippy::schedule::generate(StringRef kind, const Topology &topo,
                          int microbatches, bool training, bool splitBackward) {
  if (!llvm::is_contained(kinds(), kind))
    return error("unknown schedule '" + kind + "'; expected " +
                 llvm::join(kinds(), " or "));
  if (microbatches < 1)
    return error("a schedule needs at least one micro-batch");
  int S = topo.numStages, M = microbatches;
  Schedule schedule;
  schedule.kind = kind.str();
  schedule.microbatches = M;
  schedule.training = training;
  for (int s = 0; s < S; ++s) {
    std::vector<Action> list;
    bool hasProducers = !topo.producers[s].empty();
    bool hasConsumers = !topo.consumers(s).empty();
    auto forward = [&](int m) {
      if (hasProducers)
        list.push_back({Op::RecvF, s, m});
      list.push_back({Op::Forward, s, m});
      if (hasConsumers)
        list.push_back({Op::SendF, s, m});
    };
    auto backward = [&](int m) {
      if (hasConsumers)
        list.push_back({Op::RecvB, s, m});
      list.push_back({Op::Backward, s, m});
      if (hasProducers)
        list.push_back({Op::SendB, s, m});
    };
    int f = 0, b = 0;
    if (!training || kind == "gpipe") {
      while (f < M)
        forward(f++);
    } else {
      // 1F1B: stage s runs S-1-s forwards ahead, so the last stage
      // alternates from the start and stage s holds at most S-s
      // micro-batches in flight.
      for (int warmup = std::min(S - 1 - s, M); f < warmup;)
        forward(f++);
      while (f < M) {
        forward(f++);
        backward(b++);
      }
    }
    if (training) {
      // A split backward's first stage waits longest for the last
      // micro-batch's gradient (every other stage's backward comes first):
      // it computes the weight gradients of the others meanwhile.
      bool fillWithW = splitBackward && kind == "1f1b" && !hasProducers &&
                       hasConsumers && M > 1;
      while (b < M) {
        if (fillWithW && b == M - 1)
          list.push_back({Op::Weight, s, 0});
        backward(b++);
      }
      if (topo.isTied(s))
        list.push_back({Op::AllReduceTied, s, 0});
      list.push_back({Op::Step, s, 0});
    }
    schedule.ranks.push_back(std::move(list));
  }
  return schedule;
}

llvm::Expected<Schedule>
pippy::schedule::parse(StringRef text, int microbatches, bool training) {
  Schedule schedule;
  schedule.kind = "custom";
  schedule.microbatches = microbatches;
  schedule.training = training;
  llvm::SmallVector<StringRef> lines;
  text.split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (StringRef line : lines) {
    line = line.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    auto [head, rest] = line.split(':');
    int rank;
    if (!head.consume_front("rank") || head.getAsInteger(10, rank) ||
        rank != static_cast<int>(schedule.ranks.size()))
      return error("schedule line '" + line + "' must start with rank" +
                   llvm::Twine(schedule.ranks.size()) + ":");
    std::vector<Action> list;
    llvm::SmallVector<StringRef> words;
    rest.split(words, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef word : words) {
      std::optional<Action> action = parseAction(word);
      if (!action)
        return error("rank" + llvm::Twine(rank) + ": '" + word +
                     "' is not an action (expected e.g. 1F2, 0SEND_B3, 0STEP)");
      list.push_back(*action);
    }
    schedule.ranks.push_back(std::move(list));
  }
  return schedule;
}

namespace {

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
llvm::Error checkRank(const Schedule &schedule, const Topology &topo, int r) {
  const std::vector<Action> &list = schedule.ranks[r];
  int M = schedule.microbatches;
  bool hasProducers = !topo.producers[r].empty();
  bool hasConsumers = !topo.consumers(r).empty();
  std::map<std::pair<Op, int>, int> position;
  auto where = [&](size_t i) {
    std::string text = "rank" + std::to_string(r) + ":";
    for (size_t j = 0; j < list.size(); ++j)
      text += (j == i ? " >>" + list[j].str() + "<<" : " " + list[j].str());
    return text;
  };
  for (size_t i = 0; i < list.size(); ++i) {
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
    auto key = std::make_pair(a.op, a.hasMicrobatch() ? a.microbatch : 0);
    if (a.op == Op::Weight)
      continue; // any number, anywhere before STEP
    if (position.count(key))
      return error("action " + a.str() + " appears twice\n" + where(i));
    position[key] = static_cast<int>(i);
    auto requireBefore = [&](Op op, int m) -> llvm::Error {
      auto it = position.find({op, m});
      if (it != position.end())
        return llvm::Error::success();
      return error("action " + a.str() + " comes before " +
                   Action{op, r, m}.str() + ", which it needs\n" + where(i));
    };
    int m = a.microbatch;
    llvm::Error err = llvm::Error::success();
    switch (a.op) {
    case Op::Forward:
      if (hasProducers)
        err = requireBefore(Op::RecvF, m);
      break;
    case Op::SendF:
      err = requireBefore(Op::Forward, m);
      break;
    case Op::Backward:
      err = requireBefore(Op::Forward, m);
      if (!err && hasConsumers)
        err = requireBefore(Op::RecvB, m);
      break;
    case Op::SendB:
      err = requireBefore(Op::Backward, m);
      break;
    case Op::AllReduceTied:
    case Op::Step:
      for (int k = 0; k < M && !err; ++k)
        err = requireBefore(Op::Backward, k);
      if (!err && a.op == Op::Step && topo.isTied(r))
        err = requireBefore(Op::AllReduceTied, 0);
      break;
    default:
      break;
    }
    if (err)
      return err;
  }
  auto missing = [&](Op op, int m) {
    return error("rank" + llvm::Twine(r) + " never runs " +
                 Action{op, r, m}.str() + "\n" + where(list.size()));
  };
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

} // namespace

llvm::Error pippy::schedule::check(const Schedule &schedule,
                                   const Topology &topo) {
  int S = topo.numStages;
  if (static_cast<int>(schedule.ranks.size()) != S)
    return error("the schedule has " + llvm::Twine(schedule.ranks.size()) +
                 " ranks but the pipeline has " + llvm::Twine(S) +
                 " stages (one stage per rank)");
  for (int r = 0; r < S; ++r)
    if (llvm::Error err = checkRank(schedule, topo, r))
      return err;

  // Simulate in ticks: at each tick every rank whose next action can run
  // runs it. Sends never block; a receive waits for the sends of every
  // peer; ALLREDUCE_TIED waits until its group has reached it.
  std::vector<size_t> pc(S, 0);
  std::multiset<Message> inFlight;
  Grid grid(S);
  auto consumersOf = [&](int s) { return topo.consumers(s); };
  auto ready = [&](int r) {
    const Action &a = schedule.ranks[r][pc[r]];
    switch (a.op) {
    case Op::RecvF:
      return llvm::all_of(topo.producers[r], [&](int p) {
        return inFlight.count({Op::SendF, p, r, a.microbatch}) > 0;
      });
    case Op::RecvB:
      return llvm::all_of(consumersOf(r), [&](int c) {
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
  };
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
    if (runnable.empty()) {
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
    for (int r = 0; r < S; ++r)
      if (!llvm::is_contained(runnable, r))
        grid[r].push_back("");
    for (int r : runnable) {
      const Action &a = schedule.ranks[r][pc[r]++];
      grid[r].push_back(a.str());
      int m = a.microbatch;
      if (a.op == Op::SendF)
        for (int c : consumersOf(r))
          inFlight.insert({Op::SendF, r, c, m});
      if (a.op == Op::SendB)
        for (int p : topo.producers[r])
          inFlight.insert({Op::SendB, r, p, m});
      if (a.op == Op::RecvF)
        for (int p : topo.producers[r])
          inFlight.erase(inFlight.find({Op::SendF, p, r, m}));
      if (a.op == Op::RecvB)
        for (int c : consumersOf(r))
          inFlight.erase(inFlight.find({Op::SendB, c, r, m}));
    }
  }
  if (!inFlight.empty()) {
    auto [op, from, to, m] = *inFlight.begin();
    return error("stage " + llvm::Twine(from) + " sends " +
                 Action{op, from, m}.str() + " to stage " + llvm::Twine(to) +
                 ", which never receives it\n" + renderGrid(grid));
  }
  return llvm::Error::success();
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
