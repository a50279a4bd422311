//===- Profile.cpp - measured per-op times --------------------------------===//

#include "pippy/Support/Profile.h"

#include <nlohmann/json.hpp>

namespace pippy::profile {

using nlohmann::json;

std::string write(const Profile &profile) {
  json ops = json::array();
  for (const OpTime &op : profile.ops) {
    json entry = {{"index", op.index},
                  {"op", op.op},
                  {"stage", op.stage},
                  {"forward_us", op.forwardUs}};
    if (op.backwardUs)
      entry["backward_us"] = *op.backwardUs;
    ops.push_back(std::move(entry));
  }
  json root = {{"format", "pippy-profile"},
               {"version", 1},
               {"transfer_ns_per_byte", profile.transferNsPerByte},
               {"microbatches_measured", profile.microbatchesMeasured},
               {"ops", std::move(ops)}};
  return root.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::optional<Profile> parse(std::string_view text, std::string &error) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    error = "not valid JSON";
    return std::nullopt;
  }
  if (!root.is_object() || !root.contains("format") ||
      root["format"] != "pippy-profile") {
    error = "not a pippy profile (no \"format\": \"pippy-profile\")";
    return std::nullopt;
  }
  if (!root.contains("ops") || !root["ops"].is_array()) {
    error = "no \"ops\" array";
    return std::nullopt;
  }
  Profile profile;
  if (root.contains("transfer_ns_per_byte") &&
      root["transfer_ns_per_byte"].is_number())
    profile.transferNsPerByte = root["transfer_ns_per_byte"].get<double>();
  if (root.contains("microbatches_measured") &&
      root["microbatches_measured"].is_number_integer())
    profile.microbatchesMeasured = root["microbatches_measured"].get<int64_t>();
  for (const json &entry : root["ops"]) {
    if (!entry.is_object() || !entry.contains("index") ||
        !entry["index"].is_number_integer() || !entry.contains("forward_us") ||
        !entry["forward_us"].is_number()) {
      error = "an entry lacks a valid \"index\" or \"forward_us\"";
      return std::nullopt;
    }
    OpTime op;
    op.index = entry["index"].get<int64_t>();
    op.forwardUs = entry["forward_us"].get<double>();
    if (entry.contains("op") && entry["op"].is_string())
      op.op = entry["op"].get<std::string>();
    if (entry.contains("stage") && entry["stage"].is_number_integer())
      op.stage = entry["stage"].get<int>();
    if (entry.contains("backward_us") && entry["backward_us"].is_number())
      op.backwardUs = entry["backward_us"].get<double>();
    profile.ops.push_back(std::move(op));
  }
  return profile;
}

} // namespace pippy::profile
