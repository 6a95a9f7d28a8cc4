// tg::distributed::MpiSession and MpiCommunicator (include/tensorgrad/distributed/mpi.h).
//
// Why sum_in_rank_order does not call MPI_Allreduce(MPI_SUM): MPI picks the reduction algorithm
// (ring, recursive halving, tree) by message size and rank count, so the order of the float
// additions, and with it the rounding, changes with the buffer length, the job size and the MPI
// build. Here every element is added by one rank, its owner, in rank order, and the owner's bits
// are what every rank receives, so data-parallel training gives the same params on every rank and
// the same result as the thread group (tg::make_thread_group) for the same per-rank gradients.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <string>

#include "tensorgrad/distributed/mpi.h"

namespace tg::distributed {

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

// For the calls made before a communicator knows its rank (and for MpiSession).
void check_mpi(int code, const char* call, const std::string& where) {
  if (code == MPI_SUCCESS) return;
  throw CommunicatorError(where + ": " + call + " failed: " + mpi_error_text(code));
}

}  // namespace

// --- MpiSession ------------------------------------------------------------------------------------

MpiSession::MpiSession() : MpiSession(nullptr, nullptr) {}

MpiSession::MpiSession(int* argc, char*** argv) : uncaught_at_start_(std::uncaught_exceptions()) {
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized", "MpiSession");
  if (initialized) {
    // Someone else owns MPI's lifetime; we only report what it provides.
    check_mpi(MPI_Query_thread(&provided_), "MPI_Query_thread", "MpiSession");
    return;
  }
  int finalized = 0;
  check_mpi(MPI_Finalized(&finalized), "MPI_Finalized", "MpiSession");
  if (finalized) throw CommunicatorError("MpiSession: MPI was already finalized and cannot be initialized again");
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided_), "MPI_Init_thread", "MpiSession");
  owns_ = true;
}

MpiSession::~MpiSession() {
  if (!owns_) return;
  int finalized = 0;
  if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return;
  // Unwinding: this rank leaves its collectives unfinished, and MPI_Finalize would wait for ranks
  // that wait for this one. Abort ends the whole job with a message instead.
  if (std::uncaught_exceptions() > uncaught_at_start_) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
}

// --- MpiCommunicator -------------------------------------------------------------------------------

MpiCommunicator::MpiCommunicator(MPI_Comm comm, MpiCommunicatorOptions options) : options_(options) {
  const std::string where = "MpiCommunicator";
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized", where);
  if (!initialized) throw CommunicatorError(where + ": MPI is not initialized (create a tg::distributed::MpiSession)");
  if (options_.max_chunk_bytes < sizeof(float)) {
    throw CommunicatorError(where + ": max_chunk_bytes must be at least " + std::to_string(sizeof(float)));
  }
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup", where);
  // The destructor does not run when the constructor throws: free the duplicate here.
  try {
    // Return codes instead of MPI_ERRORS_ARE_FATAL on our own traffic, so a failed call throws a
    // CommunicatorError that names it. A rank that dies still ends the job (the launcher sees it).
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", where);
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", where);
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", where);

    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name", where);
    host_.assign(name, static_cast<std::size_t>(length));

    // Collective over comm_: the processes that share memory with this one, ordered by their rank.
    MPI_Comm local = MPI_COMM_NULL;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "MPI_Comm_split_type");
    const int rank_code = MPI_Comm_rank(local, &local_rank_);
    const int size_code = MPI_Comm_size(local, &local_size_);
    const int free_code = MPI_Comm_free(&local);
    check(rank_code, "MPI_Comm_rank (local)");
    check(size_code, "MPI_Comm_size (local)");
    check(free_code, "MPI_Comm_free (local)");

    send_counts_.resize(static_cast<std::size_t>(size_));
    send_displs_.resize(static_cast<std::size_t>(size_));
    recv_counts_.resize(static_cast<std::size_t>(size_));
    recv_displs_.resize(static_cast<std::size_t>(size_));
  } catch (...) {
    MPI_Comm_free(&comm_);
    throw;
  }
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  // After MPI_Finalize no MPI call is allowed; the process is ending anyway.
  if (comm_ == MPI_COMM_NULL || MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return;
  MPI_Comm_free(&comm_);
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::world(MpiCommunicatorOptions options) {
  return std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, options);
}

std::string MpiCommunicator::describe() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (MPI, host " + host_ + ")";
}

void MpiCommunicator::check(int code, const char* call) const {
  if (code == MPI_SUCCESS) return;
  throw CommunicatorError(describe() + ": " + call + " failed: " + mpi_error_text(code));
}

void MpiCommunicator::sum_in_rank_order(std::span<float> values) {
  if (size_ == 1) return;  // the sum of one rank's values is its values
  // Ranks passing different lengths would exchange mismatched chunks (MPI_ERR_TRUNCATE on some
  // ranks, silently wrong sums or a hang on others). One small integer allreduce finds it on every
  // rank, so all of them throw the same error.
  long long extremes[2] = {static_cast<long long>(values.size()), -static_cast<long long>(values.size())};
  check(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_LONG_LONG, MPI_MAX, comm_), "MPI_Allreduce (lengths)");
  if (extremes[0] != -extremes[1]) {
    throw CommunicatorError(describe() + ": sum_in_rank_order: the ranks passed different lengths (" +
                            std::to_string(-extremes[1]) + " to " + std::to_string(extremes[0]) +
                            " floats; this rank " + std::to_string(values.size()) + ")");
  }
  if (size_ == 1) return;
  // Buckets bound the scratch buffer and keep every count and displacement of a bucket an int
  // (the receive displacements reach the bucket length plus the rank count).
  const std::size_t bucket = std::min(options_.max_chunk_bytes / sizeof(float),
                                      static_cast<std::size_t>(INT_MAX / 2) - static_cast<std::size_t>(size_));
  for (std::size_t offset = 0; offset < values.size(); offset += bucket) {
    sum_bucket(values.subspan(offset, std::min(bucket, values.size() - offset)));
  }
}

void MpiCommunicator::sum_bucket(std::span<float> values) {
  const std::size_t n = values.size();
  const auto ranks = static_cast<std::size_t>(size_);
  // Chunk r is [n r / P, n (r + 1) / P): lengths differ by at most one, and ranks past n get an empty
  // chunk when n < P.
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::size_t begin = n * r / ranks;
    const std::size_t end = n * (r + 1) / ranks;
    send_counts_[r] = static_cast<int>(end - begin);
    send_displs_[r] = static_cast<int>(begin);
  }
  const int mine = send_counts_[static_cast<std::size_t>(rank_)];
  for (std::size_t r = 0; r < ranks; ++r) {
    recv_counts_[r] = mine;
    recv_displs_[r] = static_cast<int>(r) * mine;
  }
  // Never empty, so MPI gets a valid pointer even for an empty chunk.
  received_.resize(std::max<std::size_t>(1, ranks * static_cast<std::size_t>(mine)));

  // Reduce-scatter, step 1: rank r receives every rank's copy of chunk r, rank i's at i * mine.
  check(MPI_Alltoallv(values.data(), send_counts_.data(), send_displs_.data(), MPI_FLOAT, received_.data(),
                      recv_counts_.data(), recv_displs_.data(), MPI_FLOAT, comm_),
        "MPI_Alltoallv");
  // Step 2: add them in rank order, element by element: ((v0 + v1) + v2) + ... in f32.
  float* owned = values.data() + send_displs_[static_cast<std::size_t>(rank_)];
  const auto length = static_cast<std::size_t>(mine);
  std::copy_n(received_.data(), length, owned);
  for (std::size_t r = 1; r < ranks; ++r) {
    const float* copy = received_.data() + r * length;
    for (std::size_t k = 0; k < length; ++k) owned[k] += copy[k];
  }
  // All-gather: every rank receives each owner's sums, bit for bit.
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values.data(), send_counts_.data(), send_displs_.data(),
                       MPI_FLOAT, comm_),
        "MPI_Allgatherv");
}

std::vector<std::vector<std::byte>> MpiCommunicator::all_gather(std::span<const std::byte> bytes) {
  const auto ranks = static_cast<std::size_t>(size_);
  std::vector<std::uint64_t> sizes(ranks);
  const std::uint64_t my_size = bytes.size();
  check(MPI_Allgather(&my_size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm_), "MPI_Allgather (sizes)");

  std::vector<std::vector<std::byte>> gathered(ranks);
  for (std::size_t r = 0; r < ranks; ++r) gathered[r].reserve(sizes[r]);
  // In rounds of at most `piece` bytes per rank, so one round's total (P pieces) fits an int.
  const std::uint64_t piece =
      std::max<std::uint64_t>(1, std::min<std::uint64_t>(options_.max_chunk_bytes, INT_MAX / ranks));
  const std::uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<int> counts(ranks), displs(ranks);
  std::vector<std::byte> round;
  for (std::uint64_t start = 0; start < longest; start += piece) {
    int total = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      counts[r] = static_cast<int>(sizes[r] > start ? std::min(piece, sizes[r] - start) : 0);
      displs[r] = total;
      total += counts[r];
    }
    round.resize(std::max(1, total));
    const std::byte* send = bytes.data() + std::min<std::uint64_t>(start, my_size);
    check(MPI_Allgatherv(send, counts[static_cast<std::size_t>(rank_)], MPI_BYTE, round.data(), counts.data(),
                         displs.data(), MPI_BYTE, comm_),
          "MPI_Allgatherv");
    for (std::size_t r = 0; r < ranks; ++r) {
      gathered[r].insert(gathered[r].end(), round.begin() + displs[r], round.begin() + displs[r] + counts[r]);
    }
  }
  return gathered;
}

void MpiCommunicator::broadcast(std::vector<std::byte>& bytes, int root) {
  // Every rank passes the same root, so every rank throws here alike and none is left waiting.
  if (root < 0 || root >= size_) {
    throw CommunicatorError(describe() + ": broadcast: root " + std::to_string(root) + " is not a rank");
  }
  std::uint64_t length = bytes.size();
  check(MPI_Bcast(&length, 1, MPI_UINT64_T, root, comm_), "MPI_Bcast (size)");
  if (rank_ != root) bytes.resize(length);
  const std::uint64_t piece = std::max<std::uint64_t>(1, std::min<std::uint64_t>(options_.max_chunk_bytes, INT_MAX));
  for (std::uint64_t start = 0; start < length; start += piece) {
    const auto count = static_cast<int>(std::min(piece, length - start));
    check(MPI_Bcast(bytes.data() + start, count, MPI_BYTE, root, comm_), "MPI_Bcast");
  }
}

}  // namespace tg::distributed
