// tg::make_thread_group: a Communicator group whose ranks are threads of one process. all_gather
// and broadcast are two barrier phases over shared slots: every rank deposits a copy of its data,
// all wait, every rank reads its result from the deposits, all wait again (so no slot is reused
// while another rank still reads it). sum_in_rank_order reads the ranks' own buffers instead: each
// rank sums its share of the elements over every rank into a shared result, then every rank copies
// the result out, so the ranks add in parallel and nothing of the model's size is allocated per call.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "interp/parallel_copy.h"
#include "tensorgrad/train/communicator.h"

namespace tg {

namespace {

struct SharedGroup {
  explicit SharedGroup(int n)
      : size(n), sync(n), slots(static_cast<std::size_t>(n)), published(static_cast<std::size_t>(n)) {}
  int size;
  std::barrier<> sync;
  std::vector<std::vector<std::byte>> slots;  // one per rank, written only by that rank
  std::vector<std::span<float>> published;    // sum_in_rank_order: each rank's values
  std::vector<float> sum;                     // sum_in_rank_order's result, sized by rank 0
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<SharedGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }

  void sum_in_rank_order(std::span<float> values) override {
    SharedGroup& g = *group_;
    if (g.size == 1) return;  // the sum of one rank's values is its values
    g.published[static_cast<std::size_t>(rank_)] = values;
    if (rank_ == 0) g.sum.resize(values.size());  // no other rank touches it before the barrier
    g.sync.arrive_and_wait();
    for (int r = 0; r < g.size; ++r) {
      const std::size_t length = g.published[static_cast<std::size_t>(r)].size();
      if (length != values.size()) {
        // Every rank sees the mismatch at the same point, so all leave the collective here.
        throw CommunicatorError("sum_in_rank_order on " + describe() + ": rank " + std::to_string(r) + " passed " +
                                std::to_string(length) + " values, this rank " + std::to_string(values.size()));
      }
    }
    // This rank's share of the elements: rank 0's values, then each later rank's added in turn.
    const std::size_t n = values.size(), ranks = static_cast<std::size_t>(g.size);
    const std::size_t begin = n * static_cast<std::size_t>(rank_) / ranks;
    const std::size_t end = n * (static_cast<std::size_t>(rank_) + 1) / ranks;
    // Blocks of the share on TBB's threads: each element's sum is still taken in rank order.
    tbb::parallel_for(tbb::blocked_range<std::size_t>(begin, end, std::size_t{1} << 16),
                      [&](const tbb::blocked_range<std::size_t>& block) {
                        float* sum = g.sum.data();
                        std::copy(g.published[0].data() + block.begin(), g.published[0].data() + block.end(),
                                  sum + block.begin());
                        for (std::size_t r = 1; r < ranks; ++r) {
                          const float* other = g.published[r].data();
                          for (std::size_t i = block.begin(); i < block.end(); ++i) sum[i] += other[i];
                        }
                      });
    g.sync.arrive_and_wait();  // every share summed, and no rank reads the values any more
    interp::parallel_copy(values.data(), g.sum.data(), values.size_bytes());
    g.sync.arrive_and_wait();  // every rank has copied the sum out before it is reused
  }

  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> bytes) override {
    deposit(bytes);
    std::vector<std::vector<std::byte>> out = group_->slots;
    group_->sync.arrive_and_wait();
    return out;
  }

  void broadcast(std::vector<std::byte>& bytes, int root) override {
    if (root < 0 || root >= group_->size) {
      throw CommunicatorError("broadcast on " + describe() + ": root " + std::to_string(root) + " is not a rank");
    }
    deposit(rank_ == root ? std::span<const std::byte>(bytes) : std::span<const std::byte>());
    if (rank_ != root) bytes = group_->slots[static_cast<std::size_t>(root)];
    group_->sync.arrive_and_wait();
  }

  std::string describe() const override {
    return "rank " + std::to_string(rank_) + " of " + std::to_string(group_->size) + " (threads of one process)";
  }

 private:
  // Phase one of a collective: this rank's bytes into its slot, then wait for every rank's.
  void deposit(std::span<const std::byte> bytes) {
    group_->slots[static_cast<std::size_t>(rank_)].assign(bytes.begin(), bytes.end());
    group_->sync.arrive_and_wait();
  }

  std::shared_ptr<SharedGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_thread_group(int size) {
  if (size < 1) throw Error("make_thread_group: size is " + std::to_string(size) + "; a group needs at least 1 rank");
  auto group = std::make_shared<SharedGroup>(size);
  std::vector<std::shared_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_shared<ThreadCommunicator>(group, r));
  return out;
}

}  // namespace tg
