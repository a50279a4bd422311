//===- Folder.cpp - a folder of stage executables -------------------------===//

#include "pippy/Executable/Format.h"
#include "pippy/Support/AtomicFile.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace pippy::exe {

std::string writeFolder(const std::vector<std::string> &ranks,
                        const std::string &scheduleCsv,
                        const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return "cannot create " + dir + ": " + ec.message();
  for (size_t r = 0; r < ranks.size(); ++r)
    if (std::string error = writeFileAtomically(
            (fs::path(dir) / rankFileName(static_cast<int>(r))).string(),
            ranks[r]);
        !error.empty())
      return error;
  if (std::string error = writeFileAtomically(
          (fs::path(dir) / kScheduleFileName).string(), scheduleCsv);
      !error.empty())
    return error;
  // Executables of a larger world written there before would be read as
  // part of this one.
  for (size_t r = ranks.size();; ++r) {
    fs::path stale = fs::path(dir) / rankFileName(static_cast<int>(r));
    if (!fs::exists(stale, ec))
      break;
    fs::remove(stale, ec);
  }
  return "";
}

} // namespace pippy::exe
