#pragma once
// The MPI transport of tg::Communicator (library tensorgrad_mpi, built when CMake finds MPI): ranks
// are MPI processes, on one host or many. The core library never includes this header, so only
// programs that link tensorgrad_mpi need MPI.
//
//   int main() {
//     tg::distributed::MpiSession mpi;                    // MPI_Init_thread ... MPI_Finalize
//     auto comm = tg::distributed::MpiCommunicator::world();
//     int device = comm->local_rank();                    // one GPU per process of this host
//     ...                                                 // TrainingSpec::communicator = comm
//   }
//
// A lost rank ends the whole job: Open MPI's launcher kills the other processes and exits non-zero
// when one exits without MPI_Finalize, so no rank is left waiting in a collective forever.
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensorgrad/train/communicator.h"

namespace tg::distributed {

// Initializes MPI for the life of the object (MPI_THREAD_SERIALIZED: any one thread at a time may
// make the calls, so a training step may run on a worker thread) and finalizes it in the
// destructor. When MPI is already initialized (by the program or another library) it does neither.
// Every MpiCommunicator must be destroyed before the session that initialized MPI.
class MpiSession {
 public:
  MpiSession();
  // argc/argv are handed to MPI_Init_thread (some launchers pass arguments this way).
  MpiSession(int* argc, char*** argv);
  // Finalizes when this session initialized MPI. If it is destroyed while an exception unwinds the
  // stack, it calls MPI_Abort instead: the other ranks may be waiting in a collective this rank
  // will never enter, and MPI_Finalize would wait for them forever.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  bool owns_mpi() const { return owns_; }         // whether this session initialized MPI
  int thread_level() const { return provided_; }  // MPI_THREAD_* that MPI provides

 private:
  bool owns_ = false;
  int provided_ = 0;
  int uncaught_at_start_ = 0;
};

struct MpiCommunicatorOptions {
  // The largest piece one collective moves at a time, in bytes. sum_in_rank_order works through the
  // buffer in buckets of max_chunk_bytes / 4 floats (2^24 by default), which bounds its scratch
  // buffer and keeps MPI's int counts from overflowing; all_gather and broadcast split longer
  // messages the same way. Tests set it small to cover several buckets with short buffers.
  std::size_t max_chunk_bytes = std::size_t{1} << 26;
};

// A tg::Communicator over an MPI communicator. The constructor is collective over `comm`: it
// duplicates it (MPI_Comm_dup), so the library's messages never match the caller's, and makes the
// duplicate return errors, which every call turns into tg::CommunicatorError naming the MPI call
// and MPI's message. The destructor frees the duplicate (unless MPI is already finalized). Like every
// Communicator, it is called by one thread at a time (its scratch buffers are not shared).
class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD, MpiCommunicatorOptions options = {});
  ~MpiCommunicator() override;

  // A communicator over MPI_COMM_WORLD (collective: every process calls it).
  static std::shared_ptr<MpiCommunicator> world(MpiCommunicatorOptions options = {});

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // This process's rank among the processes of the communicator on the same host (shared memory
  // node, MPI_COMM_TYPE_SHARED) and how many there are: local_rank() picks a GPU per process.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }

  // Reduce-scatter by MPI_Alltoallv (rank r owns chunk r of each bucket and adds every rank's copy
  // of it in rank order), then MPI_Allgatherv of the owned chunks: the sum never depends on MPI's
  // reduction algorithm, and every rank receives the owner's bits. Throws CommunicatorError (on
  // every rank) when the ranks pass different lengths.
  void sum_in_rank_order(std::span<float> values) override;
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> bytes) override;
  void broadcast(std::vector<std::byte>& bytes, int root) override;
  // "rank 1 of 3 (MPI, host gpu-a)"
  std::string describe() const override;

 private:
  void check(int code, const char* call) const;
  void sum_bucket(std::span<float> values);

  MPI_Comm comm_ = MPI_COMM_NULL;
  MpiCommunicatorOptions options_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string host_;
  // Scratch of sum_in_rank_order, kept between calls (a training step sums the same length each
  // time): every rank's copy of this rank's chunk, and the counts and displacements of one bucket.
  std::vector<float> received_;
  std::vector<int> send_counts_, send_displs_, recv_counts_, recv_displs_;
};

}  // namespace tg::distributed
