//===- Schedule.cpp - schedule actions, generators and parsing ------------===//
//
// Actions and their text, topologies, the generators of the built-in
// schedules, and the parser of schedules written out rank by rank. The
// checker and the simulator are in ScheduleCheck.cpp.
//
//===----------------------------------------------------------------------===//

#include "pippy/Schedule/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

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
