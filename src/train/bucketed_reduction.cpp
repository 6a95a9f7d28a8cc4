// The data-parallel step's bucketed sum over the ranks (bucketed_reduction.h).
#include "bucketed_reduction.h"

#include <algorithm>
#include <span>
#include <tuple>
#include <utility>

#include "interp/parallel_copy.h"

namespace tg::detail {

ReduceLayout ReduceLayout::of(const Graph& graph, const std::vector<std::string>& reduced, std::uint64_t bucket_bytes) {
  // (producer node, position among the graph's outputs, name): graph inputs and constants first.
  std::vector<std::tuple<std::int64_t, std::size_t, std::string>> order;
  for (std::size_t i = 0; i < reduced.size(); ++i) {
    const ValueId v = *graph.find_output(reduced[i]);
    const NodeId producer = graph.value(v).producer;
    order.emplace_back(producer == kNoNode ? -1 : static_cast<std::int64_t>(producer), i, reduced[i]);
  }
  std::sort(order.begin(), order.end());
  ReduceLayout layout;
  std::uint64_t bucket_bytes_so_far = 0;
  for (const auto& [producer, position, name] : order) {
    if (layout.bucket_begin.empty() || (bucket_bytes > 0 && bucket_bytes_so_far >= bucket_bytes)) {
      layout.bucket_begin.push_back(layout.total);
      layout.outputs_in_bucket.push_back(0);
      bucket_bytes_so_far = 0;
    }
    const auto size = static_cast<std::size_t>(graph.type(*graph.find_output(name)).size());
    layout.slots[name] = Slot{layout.total, size, layout.bucket_begin.size() - 1, layout.slots.size()};
    ++layout.outputs_in_bucket.back();
    layout.total += size;
    bucket_bytes_so_far += 4 * size;
  }
  layout.bucket_begin.push_back(layout.total);
  return layout;
}

BucketedReduction::BucketedReduction(const ReduceLayout& layout, std::vector<float>& buffer, Communicator& comm,
                                     std::function<void(std::size_t)> summed)
    : layout_(layout),
      buffer_(buffer),
      comm_(comm),
      summed_(std::move(summed)),
      missing_(layout.outputs_in_bucket),
      delivered_(layout.slots.size(), false) {
  buffer_.resize(layout.total);
  sum_ready_buckets();  // buckets of nothing (no reduced outputs) are done at once
}

void BucketedReduction::deliver(const std::string& name, const HostTensor& value) {
  const auto it = layout_.slots.find(name);
  if (it == layout_.slots.end()) return;
  const ReduceLayout::Slot& slot = it->second;
  if (delivered_[slot.index] || slot.bucket < next_bucket_) return;
  float* to = buffer_.data() + slot.offset;
  if (value.storage() == HostStorage::f32) {
    interp::parallel_copy(to, value.raw_data(), slot.size * sizeof(float));
  } else {
    const std::vector<float> converted = value.to_f32();
    std::copy(converted.begin(), converted.end(), to);
  }
  delivered_[slot.index] = true;
  --missing_[slot.bucket];
  sum_ready_buckets();
}

void BucketedReduction::sum_ready_buckets() {
  for (; next_bucket_ < missing_.size() && missing_[next_bucket_] == 0; ++next_bucket_) {
    const std::size_t begin = layout_.bucket_begin[next_bucket_], end = layout_.bucket_begin[next_bucket_ + 1];
    comm_.sum_in_rank_order(std::span<float>(buffer_.data() + begin, end - begin));
    if (summed_) summed_(next_bucket_);
  }
}

void BucketedReduction::finish() {
  for (const auto& [name, slot] : layout_.slots) {
    if (delivered_[slot.index] || slot.bucket < next_bucket_) continue;
    std::fill_n(buffer_.data() + slot.offset, slot.size, 0.0f);
    delivered_[slot.index] = true;
    --missing_[slot.bucket];
  }
  sum_ready_buckets();
}

}  // namespace tg::detail
