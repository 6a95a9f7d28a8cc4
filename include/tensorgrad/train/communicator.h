#pragma once
// tg::Communicator: the few collectives data-parallel training needs (TrainingSpec::communicator),
// behind an interface so the training layer depends on no transport. Two implementations:
//  - tg::make_thread_group (here): ranks are threads of one process, for tests and for one process
//    driving several devices;
//  - tg::distributed::MpiCommunicator (tensorgrad/distributed/mpi.h, library tensorgrad_mpi): ranks
//    are MPI processes, on one host or many.
// Every call is collective: every rank of the group makes the same calls in the same order (with
// the same lengths where a call says so), or the group waits forever. A transport failure throws
// CommunicatorError; MPI's default handler ends the whole job instead, which is what a lost rank
// must do (no rank can complete a step without the others).
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensorgrad/ir/error.h"

namespace tg {

class CommunicatorError : public Error {
 public:
  using Error::Error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;  // 0 .. size() - 1
  virtual int size() const = 0;  // >= 1

  // Replaces `values` on every rank by the element-wise sum of all ranks' `values`, added in f32 in
  // rank order, ((v0 + v1) + v2) + ..., so every rank holds the same bits and they do not depend on
  // timing, message sizes or the transport's algorithm. Every rank passes the same length.
  virtual void sum_in_rank_order(std::span<float> values) = 0;
  // Every rank's `bytes` (lengths may differ), indexed by rank.
  virtual std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> bytes) = 0;
  // Rank `root`'s `bytes` on every rank (resized to its length); root's are unchanged.
  virtual void broadcast(std::vector<std::byte>& bytes, int root) = 0;
  // For messages: "rank 1 of 3 (MPI, host gpu-a)".
  virtual std::string describe() const = 0;
};

// `size` communicators of one group whose ranks are threads of this process: rank r is element r,
// to be used by one thread each (a collective blocks until every rank has called it). Throws
// tg::Error for size < 1.
std::vector<std::shared_ptr<Communicator>> make_thread_group(int size);

}  // namespace tg
