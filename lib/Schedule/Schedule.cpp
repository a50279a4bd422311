//===- Schedule.cpp - actions, topologies, placements and the text form ---===//
//
// Actions and their text, topologies, how stages are placed on ranks, the
// communication added to compute-only action lists, and the parser of
// schedules written out rank by rank. The generators are in Generators.cpp,
// the CSV form in Csv.cpp, the checker in ScheduleCheck.cpp and the
// simulator in Simulate.cpp.
//
//===----------------------------------------------------------------------===//

#include "pippy/Schedule/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace pippy::schedule;
using llvm::StringRef;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace

std::string pippy::schedule::placementText(int numStages, int numRanks) {
  auto count = [](int n, const char *noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
  };
  return count(numStages, "stage") + " on " + count(numRanks, "rank");
}

bool Action::isCompute() const {
  return op == Op::Forward || op == Op::Backward || op == Op::BackwardInput ||
         op == Op::BackwardWeight;
}

std::optional<Action> pippy::schedule::parseAction(StringRef text) {
  std::optional<exe::Action> a = exe::parseAction(text.str());
  if (!a)
    return std::nullopt;
  return Action{a->kind(), a->stage(), a->microbatch()};
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

llvm::Expected<std::vector<int>>
pippy::schedule::place(Placement placement, int numStages, int numRanks) {
  if (numRanks < 1 || numStages < 1)
    return error("a schedule needs at least one stage and one rank");
  std::vector<int> rankOf(numStages);
  switch (placement) {
  case Placement::OnePerRank:
    if (numStages != numRanks)
      return error(placementText(numStages, numRanks) +
                   ": this kind runs one stage per rank");
    for (int s = 0; s < numStages; ++s)
      rankOf[s] = s;
    break;
  case Placement::Loop:
    if (numStages % numRanks != 0)
      return error(placementText(numStages, numRanks) +
                   ": this kind needs the same number of stages on every "
                   "rank");
    for (int s = 0; s < numStages; ++s)
      rankOf[s] = s % numRanks;
    break;
  case Placement::V:
    if (numStages != 2 * numRanks)
      return error(placementText(numStages, numRanks) +
                   ": this kind needs exactly two stages per rank");
    for (int s = 0; s < numStages; ++s)
      rankOf[s] = s < numRanks ? s : 2 * numRanks - 1 - s;
    break;
  }
  return rankOf;
}

std::vector<int> Schedule::stagesOf(int r) const {
  std::vector<int> result;
  for (size_t s = 0; s < stageRank.size(); ++s)
    if (stageRank[s] == r)
      result.push_back(static_cast<int>(s));
  return result;
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

llvm::ArrayRef<Kind> pippy::schedule::kinds() {
  static const Kind all[] = {
      Kind::GPipe,     Kind::OneFOneB, Kind::Interleaved1F1B,
      Kind::LoopedBFS, Kind::ZBH1,     Kind::ZB1P,
      Kind::ZBV,       Kind::DualPipeV};
  return all;
}

Placement pippy::schedule::placementOf(Kind kind) {
  switch (kind) {
  case Kind::Interleaved1F1B:
  case Kind::LoopedBFS:
  case Kind::ZB1P:
    return Placement::Loop;
  case Kind::ZBV:
  case Kind::DualPipeV:
    return Placement::V;
  default:
    return Placement::OnePerRank;
  }
}

std::string pippy::schedule::kindName(Kind kind) {
  return exe::scheduleKindText(kind);
}

llvm::Expected<Kind> pippy::schedule::parseKind(StringRef name) {
  std::optional<Kind> kind = exe::parseScheduleKind(name.str());
  if (kind && llvm::is_contained(kinds(), *kind))
    return *kind;
  std::vector<std::string> names;
  for (Kind k : kinds())
    names.push_back(kindName(k));
  return error("unknown schedule '" + name + "'; expected one of " +
               llvm::join(names, ", "));
}

namespace {

/// Whether `stage` has a peer on another rank among `peers`.
bool anyRemote(const Schedule &schedule, int stage,
               const std::vector<int> &peers) {
  return llvm::any_of(peers, [&](int p) {
    return schedule.stageRank[p] != schedule.stageRank[stage];
  });
}

} // namespace

void pippy::schedule::addCommunication(Schedule &schedule,
                                       const Topology &topo) {
  for (int r = 0; r < schedule.numRanks(); ++r) {
    std::vector<Action> list;
    for (const Action &a : schedule.ranks[r]) {
      int s = a.stage, m = a.microbatch;
      bool remoteIn = anyRemote(schedule, s, topo.producers[s]);
      bool remoteOut = anyRemote(schedule, s, topo.consumers(s));
      bool gradient = a.op == Op::Backward || a.op == Op::BackwardInput;
      if (a.op == Op::Forward && remoteIn)
        list.push_back({Op::RecvF, s, m});
      if (gradient && remoteOut)
        list.push_back({Op::RecvB, s, m});
      list.push_back(a);
      if (a.op == Op::Forward && remoteOut)
        list.push_back({Op::SendF, s, m});
      if (gradient && remoteIn)
        list.push_back({Op::SendB, s, m});
    }
    if (schedule.training) {
      // One ALLREDUCE_TIED sums every tied group the rank holds a stage of.
      for (int s : schedule.stagesOf(r))
        if (topo.isTied(s)) {
          list.push_back({Op::AllReduceTied, s, 0});
          break;
        }
      for (int s : schedule.stagesOf(r))
        list.push_back({Op::Step, s, 0});
    }
    schedule.ranks[r] = std::move(list);
  }
}

llvm::Expected<Schedule> pippy::schedule::parse(StringRef text, int numStages,
                                                int microbatches,
                                                bool training) {
  Schedule schedule;
  schedule.microbatches = microbatches;
  schedule.training = training;
  schedule.stageRank.assign(numStages, -1);
  llvm::SmallVector<StringRef> lines;
  text.split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (StringRef line : lines) {
    line = line.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    auto [head, rest] = line.split(':');
    int rank;
    if (!head.consume_front("rank") || head.getAsInteger(10, rank) ||
        rank != schedule.numRanks())
      return error("schedule line '" + line + "' must start with rank" +
                   llvm::Twine(schedule.numRanks()) + ":");
    std::vector<Action> list;
    llvm::SmallVector<StringRef> words;
    rest.split(words, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef word : words) {
      std::optional<Action> action = parseAction(word);
      if (!action)
        return error("rank" + llvm::Twine(rank) + ": '" + word +
                     "' is not an action (expected e.g. 1F2, 0SEND_B3, 0STEP)");
      if (action->stage < 0 || action->stage >= numStages)
        return error("rank" + llvm::Twine(rank) + ": " + word +
                     " names stage " + llvm::Twine(action->stage) +
                     "; the pipeline has stages 0.." +
                     llvm::Twine(numStages - 1));
      int &holder = schedule.stageRank[action->stage];
      if (holder >= 0 && holder != rank)
        return error("stage " + llvm::Twine(action->stage) +
                     " has actions on rank" + llvm::Twine(holder) +
                     " and rank" + llvm::Twine(rank) +
                     "; a stage runs on one rank");
      holder = rank;
      list.push_back(*action);
    }
    schedule.ranks.push_back(std::move(list));
  }
  for (int s = 0; s < numStages; ++s)
    if (schedule.stageRank[s] < 0)
      return error("no rank runs stage " + llvm::Twine(s));
  return schedule;
}
