//===- Plot.cpp - schedules drawn as SVG ----------------------------------===//
//
// One panel per timeline (a simulation, a traced run), one row per rank,
// one box per compute action coloured by kind (F, B, I, W) over a grey row,
// so idle time shows as the grey between boxes. Each box is a
// `<rect class="KIND" data-rank="R">` with the action as its tooltip.
//
//===----------------------------------------------------------------------===//

#include "pippy/Schedule/Schedule.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace pippy::schedule;

namespace {

constexpr double kLeft = 70, kWidth = 1000, kRow = 26, kGap = 6, kTitle = 28,
                 kPanelGap = 24;

const char *kindClass(Op op) {
  switch (op) {
  case Op::Forward:
    return "F";
  case Op::Backward:
    return "B";
  case Op::BackwardInput:
    return "I";
  default:
    return "W";
  }
}

std::string xmlText(const std::string &text) {
  std::string out;
  for (char c : text)
    out += c == '&'   ? "&amp;"
           : c == '<' ? "&lt;"
           : c == '>' ? "&gt;"
                      : std::string(1, c);
  return out;
}

void legend(llvm::raw_ostream &os, double y) {
  const std::pair<const char *, const char *> kinds[] = {
      {"F", "forward"},
      {"B", "backward"},
      {"I", "input gradients"},
      {"W", "weight gradients"}};
  double x = kLeft;
  for (auto [cls, text] : kinds) {
    os << llvm::format("<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"14\" "
                       "height=\"14\"/>",
                       cls, x, y)
       << llvm::format("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 18,
                       y + 12, text);
    x += 150;
  }
}

} // namespace

PlotPanel pippy::schedule::simulatedPanel(const Schedule &schedule,
                                          const Simulation &sim,
                                          const std::string &title) {
  PlotPanel panel;
  panel.title = title;
  panel.ranks = schedule.numRanks();
  panel.span = sim.makespan;
  for (int r = 0; r < schedule.numRanks(); ++r)
    for (const SimulatedBox &box : sim.boxes[r])
      panel.boxes.push_back({r, box.start, box.end, box.action});
  return panel;
}

llvm::Expected<PlotPanel>
pippy::schedule::tracePanel(llvm::StringRef trace, const std::string &title) {
  llvm::Expected<llvm::json::Value> root = llvm::json::parse(trace);
  if (!root)
    return root.takeError();
  const llvm::json::Object *object = root->getAsObject();
  const llvm::json::Array *events =
      object ? object->getArray("traceEvents") : nullptr;
  if (!events)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "not a pippy-run trace (no traceEvents)");
  // A training run's last step (events carry args.step), or all of them.
  auto stepOf = [](const llvm::json::Object &e) -> int64_t {
    const llvm::json::Object *args = e.getObject("args");
    std::optional<int64_t> step =
        args ? args->getInteger("step") : std::nullopt;
    return step.value_or(0);
  };
  int64_t last = 0;
  for (const llvm::json::Value &value : *events)
    if (const llvm::json::Object *e = value.getAsObject())
      last = std::max(last, stepOf(*e));
  PlotPanel panel;
  panel.title =
      last > 0 ? title + " (step " + std::to_string(last) + ")" : title;
  double first = -1;
  for (const llvm::json::Value &value : *events) {
    const llvm::json::Object *e = value.getAsObject();
    if (!e || e->getString("ph") != "X" || stepOf(*e) != last)
      continue;
    std::optional<llvm::StringRef> name = e->getString("name");
    std::optional<int64_t> pid = e->getInteger("pid");
    std::optional<double> ts = e->getNumber("ts"), dur = e->getNumber("dur");
    if (!name || !pid || !ts || !dur)
      continue;
    std::optional<Action> action = parseAction(*name);
    if (!action || !action->isCompute())
      continue;
    panel.boxes.push_back({static_cast<int>(*pid), *ts, *ts + *dur, *action});
    first = first < 0 ? *ts : std::min(first, *ts);
    panel.ranks = std::max(panel.ranks, static_cast<int>(*pid) + 1);
  }
  for (PlotBox &box : panel.boxes) {
    box.start -= first;
    box.end -= first;
    panel.span = std::max(panel.span, box.end);
  }
  return panel;
}

std::string pippy::schedule::renderSvg(const std::vector<PlotPanel> &panels) {
  double height = 40;
  for (const PlotPanel &panel : panels)
    height += kTitle + panel.ranks * (kRow + kGap) + kPanelGap;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n",
            kLeft + kWidth + 20, height)
     << "<style>.F{fill:#4e79a7}.B{fill:#59a14f}.I{fill:#f28e2b}"
        ".W{fill:#b07aa1}.idle{fill:#e6e6e6}</style>\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  double y = 10;
  for (const PlotPanel &panel : panels) {
    os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">",
                       kLeft, y + 16)
       << xmlText(panel.title) << "</text>\n";
    y += kTitle;
    double scale = panel.span > 0 ? kWidth / panel.span : 0;
    for (int r = 0; r < panel.ranks; ++r) {
      double top = y + r * (kRow + kGap);
      os << llvm::format("<text x=\"4\" y=\"%.1f\">rank %d</text>", top + 17, r)
         << llvm::format("<rect class=\"idle\" x=\"%.1f\" y=\"%.1f\" "
                         "width=\"%.1f\" height=\"%.1f\"/>\n",
                         kLeft, top, kWidth, kRow);
    }
    for (const PlotBox &box : panel.boxes) {
      double top = y + box.rank * (kRow + kGap);
      double x = kLeft + box.start * scale;
      double w = std::max((box.end - box.start) * scale, 0.5);
      os << llvm::format("<rect class=\"%s\" data-rank=\"%d\" x=\"%.2f\" "
                         "y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                         "stroke=\"white\" stroke-width=\"0.5\">",
                         kindClass(box.action.op), box.rank, x, top, w, kRow)
         << "<title>" << box.action.str() << "</title></rect>";
      if (w >= 26)
        os << llvm::format("<text x=\"%.2f\" y=\"%.1f\" fill=\"white\" "
                           "font-size=\"10\">",
                           x + 2, top + 16)
           << box.action.str() << "</text>";
      os << "\n";
    }
    y += panel.ranks * (kRow + kGap) + kPanelGap;
  }
  legend(os, y - kPanelGap + 8);
  os << "</svg>\n";
  os.flush();
  return text;
}
