#pragma once
// Internal: the data-parallel step's sum of every rank's gradients, taken bucket by bucket while
// the backward still runs (src/train/data_parallel.cpp).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/train/communicator.h"

namespace tg::detail {

// Where each reduced output lives in the one reduction buffer, and the buckets summed as units.
// Outputs are laid out in the order of the nodes that produce them (so a backward hands them over
// roughly bucket after bucket) and cut into buckets of at least `bucket_bytes` (0: one bucket).
// Every rank derives the same layout from the same graph, so the ranks' collectives match.
struct ReduceLayout {
  struct Slot {
    std::size_t offset = 0, size = 0;  // in floats
    std::size_t bucket = 0;
    std::size_t index = 0;  // in layout order
  };
  std::map<std::string, Slot, std::less<>> slots;
  std::vector<std::size_t> bucket_begin;  // offsets, plus the total at the end
  std::vector<std::size_t> outputs_in_bucket;
  std::size_t total = 0;

  static ReduceLayout of(const Graph& graph, const std::vector<std::string>& reduced, std::uint64_t bucket_bytes);
};

// One step's reduction: deliver() each output as the backward produces it (a Session::run sink),
// finish() once the run has ended. A bucket is summed over the ranks, in rank order, as soon as all
// its outputs are in, buckets in layout order; finish() sums the rest, with zeros for outputs never
// delivered (a run that failed: the ranks still take part in every bucket's sum, so their
// collectives stay in step, and nobody applies the update). The sums are elementwise in rank order,
// so the bits do not depend on the buckets.
class BucketedReduction {
 public:
  // `summed(b)`, when given, runs right after bucket b's sum (to move the sums on at once).
  BucketedReduction(const ReduceLayout& layout, std::vector<float>& buffer, Communicator& comm,
                    std::function<void(std::size_t)> summed = {});
  // Ignores names outside the layout (captures). Throws what the communicator throws.
  void deliver(const std::string& name, const HostTensor& value);
  void finish();

 private:
  void sum_ready_buckets();
  const ReduceLayout& layout_;
  std::vector<float>& buffer_;
  Communicator& comm_;
  std::function<void(std::size_t)> summed_;
  std::vector<std::size_t> missing_;  // per bucket: outputs not delivered yet
  std::vector<bool> delivered_;       // per slot, by Slot::index
  std::size_t next_bucket_ = 0;
};

}  // namespace tg::detail
