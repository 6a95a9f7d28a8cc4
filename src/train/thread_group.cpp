// tg::make_thread_group: a Communicator group whose ranks are threads of one process. Each
// collective is two barrier phases over shared slots: every rank deposits a copy of its data, all
// wait, every rank computes its result from all deposits, all wait again (so no slot is reused
// while another rank still reads it).
#include <barrier>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tensorgrad/train/communicator.h"

namespace tg {

namespace {

struct SharedGroup {
  explicit SharedGroup(int n) : size(n), sync(n), slots(static_cast<std::size_t>(n)) {}
  int size;
  std::barrier<> sync;
  std::vector<std::vector<std::byte>> slots;  // one per rank, written only by that rank
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<SharedGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }

  void sum_in_rank_order(std::span<float> values) override {
    deposit(std::as_bytes(values));
    const std::size_t bytes = values.size_bytes();
    for (int r = 0; r < group_->size; ++r) {
      const std::vector<std::byte>& slot = group_->slots[static_cast<std::size_t>(r)];
      if (slot.size() != bytes) {
        // Leave the barrier's phase balanced before reporting, so the other ranks are not stranded.
        group_->sync.arrive_and_wait();
        throw CommunicatorError("sum_in_rank_order on " + describe() + ": rank " + std::to_string(r) + " passed " +
                                std::to_string(slot.size() / sizeof(float)) + " values, this rank " +
                                std::to_string(values.size()));
      }
    }
    // Rank 0's values, then each later rank's added in turn: the same order on every rank.
    std::vector<float> sum(values.size());
    if (!sum.empty()) std::memcpy(sum.data(), group_->slots[0].data(), bytes);
    for (int r = 1; r < group_->size; ++r) {
      const auto* other = reinterpret_cast<const float*>(group_->slots[static_cast<std::size_t>(r)].data());
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += other[i];
    }
    group_->sync.arrive_and_wait();
    std::copy(sum.begin(), sum.end(), values.begin());
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
