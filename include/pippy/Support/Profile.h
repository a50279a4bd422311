//===- Profile.h - measured per-op times ------------------------*- C++ -*-===//
//
// The profile `pippy-run --profile FILE` writes and
// `--pippy-split="profile=FILE"` balances by: JSON of the form
//
//   {"format": "pippy-profile", "version": 1, "transfer_ns_per_byte": 1.0,
//    "microbatches_measured": 6,
//    "ops": [{"index": 0, "op": "torch.aten.linear", "stage": 0,
//             "forward_us": 12.5, "backward_us": 20.1}, ...]}
//
// `index` counts the ops of the graph IR that the split counts (all but
// parameters and constants) in order; `backward_us`, when absent, is taken
// as twice `forward_us`. Defined here alone, for both sides.
//
// No LLVM or libtorch: the runtime-only build uses it too.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_PROFILE_H
#define PIPPY_SUPPORT_PROFILE_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pippy::profile {

struct OpTime {
  int64_t index = 0;
  std::string op; ///< may be empty when read
  int stage = 0;
  double forwardUs = 0;
  std::optional<double> backwardUs;
};

struct Profile {
  double transferNsPerByte = 1.0;
  int64_t microbatchesMeasured = 0;
  std::vector<OpTime> ops;
};

/// The JSON text of `profile`.
std::string write(const Profile &profile);

/// Reads a profile; none with `error` set to one line.
std::optional<Profile> parse(std::string_view text, std::string &error);

} // namespace pippy::profile

#endif // PIPPY_SUPPORT_PROFILE_H
