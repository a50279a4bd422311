//===- DataParallel.cpp - gradients summed over the replicas --------------===//

#include "DataParallel.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace pippy::rt {

GradientReducer::GradientReducer(Communicator &group, std::string where)
    : group(group), where(std::move(where)) {}

void GradientReducer::addStage(
    int stage, std::vector<std::pair<std::string, at::Tensor>> params) {
  auto &mine = stages[stage];
  mine.insert(mine.end(), params.begin(), params.end());
}

void GradientReducer::addLate(
    std::vector<std::pair<std::string, at::Tensor>> params) {
  late.insert(late.end(), params.begin(), params.end());
}

std::vector<std::vector<size_t>>
GradientReducer::buckets(const std::vector<at::Tensor> &tensors,
                         int64_t capacity) {
  std::vector<std::vector<size_t>> result;
  // The open bucket of each dtype, and its bytes.
  std::map<at::ScalarType, std::pair<size_t, int64_t>> open;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor &t = tensors[i];
    int64_t size = t.numel() * static_cast<int64_t>(t.element_size());
    auto it = open.find(t.scalar_type());
    if (it == open.end() || it->second.second + size > capacity) {
      result.push_back({i});
      open[t.scalar_type()] = {result.size() - 1, size};
      continue;
    }
    result[it->second.first].push_back(i);
    it->second.second += size;
  }
  return result;
}

void GradientReducer::launch(
    const std::vector<std::pair<std::string, at::Tensor>> &params,
    const std::string &what) {
  // Latest used first: the order backward finishes them in.
  std::vector<at::Tensor> grads;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const at::Tensor &grad = it->second.grad();
    if (!grad.defined() || !started.insert(it->first).second)
      continue;
    grads.push_back(grad);
  }
  for (const std::vector<size_t> &indices : buckets(grads, kBucketBytes)) {
    Bucket bucket;
    std::vector<at::Tensor> flat;
    for (size_t i : indices) {
      bucket.grads.push_back(grads[i]);
      flat.push_back(grads[i].reshape({-1}));
    }
    // A bucket of one contiguous gradient is summed in place.
    bool alone = indices.size() == 1 && grads[indices[0]].is_contiguous();
    bucket.flat = alone ? flat[0] : at::cat(flat);
    bytes += bucket.flat.numel() * bucket.flat.element_size();
    bucket.handle = group.allReduceSum(
        bucket.flat, where + ": summing " + what + " over the replicas");
    inFlight.push_back(std::move(bucket));
  }
}

void GradientReducer::start(int stage) {
  auto it = stages.find(stage);
  if (it != stages.end())
    launch(it->second, "stage " + std::to_string(stage) + "'s gradients");
}

void GradientReducer::finish() {
  for (const auto &[stage, params] : stages)
    launch(params, "stage " + std::to_string(stage) + "'s gradients");
  launch(late, "tied weights' gradients");
  auto begin = std::chrono::steady_clock::now();
  for (Bucket &bucket : inFlight) {
    bucket.handle->wait();
    if (bucket.grads.size() == 1 &&
        bucket.flat.data_ptr() == bucket.grads[0].data_ptr())
      continue;
    int64_t offset = 0;
    for (at::Tensor &grad : bucket.grads) {
      int64_t n = grad.numel();
      grad.copy_(bucket.flat.slice(0, offset, offset + n).view(grad.sizes()));
      offset += n;
    }
  }
  waited +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  inFlight.clear();
  started.clear();
}

std::vector<int> shardOwners(const std::vector<at::Tensor> &params,
                             int replicas) {
  auto bytes = [&](size_t i) {
    return params[i].numel() * static_cast<int64_t>(params[i].element_size());
  };
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes(a) > bytes(b); });
  std::vector<int64_t> load(replicas, 0);
  std::vector<int> owners(params.size(), 0);
  for (size_t i : order) {
    int least = static_cast<int>(std::min_element(load.begin(), load.end()) -
                                 load.begin());
    owners[i] = least;
    load[least] += bytes(i);
  }
  return owners;
}

void shareStepped(Communicator &group, const std::vector<at::Tensor> &params,
                  const std::vector<int> &owners, const std::string &where) {
  struct Share {
    std::vector<at::Tensor> params;
    at::Tensor flat;
    CommHandlePtr handle;
  };
  std::vector<Share> shares;
  for (int owner = 0; owner < group.size(); ++owner) {
    std::map<at::ScalarType, std::vector<at::Tensor>> byType;
    for (size_t i = 0; i < params.size(); ++i)
      if (owners[i] == owner)
        byType[params[i].scalar_type()].push_back(params[i]);
    for (auto &[type, mine] : byType) {
      Share share{mine, at::Tensor(), nullptr};
      std::vector<at::Tensor> flat;
      for (const at::Tensor &p : mine)
        flat.push_back(p.detach().reshape({-1}));
      share.flat = at::cat(flat);
      share.handle = group.broadcast(share.flat, owner,
                                     where + ": sharing the weights replica " +
                                         std::to_string(owner) + " stepped");
      shares.push_back(std::move(share));
    }
  }
  for (Share &share : shares) {
    share.handle->wait();
    int64_t offset = 0;
    for (at::Tensor &p : share.params) {
      int64_t n = p.numel();
      p.detach().copy_(share.flat.slice(0, offset, offset + n).view(p.sizes()));
      offset += n;
    }
  }
}

} // namespace pippy::rt
