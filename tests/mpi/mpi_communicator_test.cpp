// tg::distributed::MpiCommunicator's collectives, on every rank of the job (tg_mpi_tests runs on 2 and
// 3 ranks). Checks use EXPECT_* only before a collective: an ASSERT that returns on one rank would
// leave the others waiting in it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tensorgrad/distributed/mpi.h"

namespace {

using tg::CommunicatorError;
using tg::distributed::MpiCommunicator;
using tg::distributed::MpiCommunicatorOptions;

// 7 floats a bucket: a few hundred floats cross many buckets, and odd splits over 2 and 3 ranks.
constexpr MpiCommunicatorOptions kSmallChunks{.max_chunk_bytes = 7 * sizeof(float)};

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Rank r's values: a mix of +-1e8, +-1 and small fractions, so the rounding of a sum depends on the
// order of its terms ((1e8 + 1) - 1e8 is 0 in f32, (1e8 - 1e8) + 1 is 1).
std::vector<float> rank_values(int rank, std::size_t n) {
  std::uint64_t state = 0x5eed0000ULL + static_cast<std::uint64_t>(rank) * 7919 + n;
  std::vector<float> values(n);
  for (float& v : values) {
    const std::uint64_t bits = splitmix64(state);
    const float sign = (bits & 1) ? -1.0f : 1.0f;
    const float fraction = static_cast<float>((bits >> 40) & 0xffff) / 65536.0f;
    switch ((bits >> 8) % 4) {
      case 0:
        v = sign * 1e8f;
        break;
      case 1:
        v = sign;
        break;
      case 2:
        v = sign * fraction;
        break;
      default:
        v = sign * 3e7f * fraction;
    }
  }
  return values;
}

// The sum sum_in_rank_order must give: every rank's values added in f32, rank 0 first.
std::vector<float> rank_order_sum(int ranks, std::size_t n) {
  std::vector<float> sum = rank_values(0, n);
  for (int r = 1; r < ranks; ++r) {
    const std::vector<float> values = rank_values(r, n);
    for (std::size_t i = 0; i < n; ++i) sum[i] += values[i];
  }
  return sum;
}

std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits(values.size());
  std::transform(values.begin(), values.end(), bits.begin(), [](float v) { return std::bit_cast<std::uint32_t>(v); });
  return bits;
}

std::span<const std::byte> as_bytes(const std::vector<float>& values) { return std::as_bytes(std::span(values)); }

// Sums each length and checks the result bit for bit against the local rank-order sum and against
// rank 0's result (gathered, so a rank that got other bits shows up on every rank).
void check_sums(MpiCommunicator& comm, const std::vector<std::size_t>& lengths) {
  for (const std::size_t n : lengths) {
    SCOPED_TRACE("length " + std::to_string(n) + " on " + comm.describe());
    std::vector<float> values = rank_values(comm.rank(), n);
    comm.sum_in_rank_order(values);
    EXPECT_EQ(bits_of(values), bits_of(rank_order_sum(comm.size(), n)));
    const std::span<const std::byte> mine = as_bytes(values);
    const auto gathered = comm.all_gather(mine);
    for (int r = 0; r < comm.size(); ++r) {
      const std::vector<std::byte>& theirs = gathered[static_cast<std::size_t>(r)];
      EXPECT_TRUE(std::equal(theirs.begin(), theirs.end(), mine.begin(), mine.end()))
          << "rank " << r << " holds other bits";
    }
  }
}

std::vector<std::size_t> interesting_lengths(int ranks) {
  const auto p = static_cast<std::size_t>(ranks);
  return {0, 1, p - 1, p, p + 1, 7, 8, 13, 2 * p + 1, 1000};
}

TEST(MpiCommunicator, WorldMatchesCommWorld) {
  auto comm = MpiCommunicator::world();
  int rank = -1;
  int size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(comm->rank(), rank);
  EXPECT_EQ(comm->size(), size);
  EXPECT_GE(size, 2) << "the mpi tests are meant to run on several ranks";
  const std::string expected = "rank " + std::to_string(rank) + " of " + std::to_string(size) + " (MPI, host ";
  EXPECT_EQ(comm->describe().rfind(expected, 0), 0u) << comm->describe();
  EXPECT_FALSE(comm->host().empty());
}

TEST(MpiCommunicator, TestDataMakesTheOrderMatter) {
  // Without this, a transport that added in another order could still pass the sum tests.
  auto comm = MpiCommunicator::world();
  if (comm->size() < 3) GTEST_SKIP() << "two terms add the same in either order";
  const std::size_t n = 1000;
  std::vector<float> reverse = rank_values(comm->size() - 1, n);
  for (int r = comm->size() - 2; r >= 0; --r) {
    const std::vector<float> values = rank_values(r, n);
    for (std::size_t i = 0; i < n; ++i) reverse[i] += values[i];
  }
  EXPECT_NE(bits_of(reverse), bits_of(rank_order_sum(comm->size(), n)));
}

TEST(MpiCommunicator, SumInRankOrderIsBitExactAndTheSameOnEveryRank) {
  auto comm = MpiCommunicator::world();
  std::vector<std::size_t> lengths = interesting_lengths(comm->size());
  // Chunks of ~130 KB: past the shared-memory transport's eager limit (4 KB for Open MPI's vader),
  // so the large-message protocol runs too.
  lengths.push_back(100003);
  check_sums(*comm, lengths);
}

TEST(MpiCommunicator, SumInRankOrderAcrossManyBuckets) {
  MpiCommunicator comm(MPI_COMM_WORLD, kSmallChunks);
  std::vector<std::size_t> lengths = interesting_lengths(comm.size());
  lengths.push_back(6);
  lengths.push_back(14);
  lengths.push_back(7 * 5 + 3);
  check_sums(comm, lengths);
}

TEST(MpiCommunicator, SumInRankOrderRepeatsOnTheSameBuffer) {
  // The scratch buffers are reused between calls and between lengths.
  MpiCommunicator comm(MPI_COMM_WORLD, kSmallChunks);
  check_sums(comm, {1000, 5, 1000, 0, 31});
}

TEST(MpiCommunicator, SumInRankOrderRefusesDifferentLengthsOnEveryRank) {
  auto comm = MpiCommunicator::world();
  std::vector<float> values(static_cast<std::size_t>(comm->rank()) + 3, 1.0f);
  EXPECT_THROW(comm->sum_in_rank_order(values), CommunicatorError);
  // Nothing was exchanged, so the communicator still works.
  check_sums(*comm, {10});
}

TEST(MpiCommunicator, SumOnASubCommunicator) {
  // Ranks of a split communicator count within it: even world ranks form one group, odd ones another.
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm half = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half), MPI_SUCCESS);
  {
    MpiCommunicator comm(half, kSmallChunks);
    EXPECT_EQ(comm.rank(), world_rank / 2);
    check_sums(comm, {0, 1, 29});
  }
  MPI_Comm_free(&half);
}

TEST(MpiCommunicator, AllGatherDifferentLengthsIncludingEmpty) {
  for (const MpiCommunicatorOptions options : {MpiCommunicatorOptions{}, kSmallChunks}) {
    MpiCommunicator comm(MPI_COMM_WORLD, options);
    SCOPED_TRACE("max_chunk_bytes " + std::to_string(options.max_chunk_bytes));
    // Rank 1 sends nothing; the others send lengths that are not multiples of the chunk.
    const auto length = [](int r) { return r == 1 ? std::size_t{0} : std::size_t(100 * r + 5); };
    const auto byte_at = [](int r, std::size_t i) { return static_cast<std::byte>((r * 31 + i * 7) & 0xff); };
    std::vector<std::byte> mine(length(comm.rank()));
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = byte_at(comm.rank(), i);
    const auto gathered = comm.all_gather(mine);
    EXPECT_EQ(gathered.size(), static_cast<std::size_t>(comm.size()));
    for (int r = 0; r < std::min<int>(comm.size(), static_cast<int>(gathered.size())); ++r) {
      std::vector<std::byte> expected(length(r));
      for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = byte_at(r, i);
      EXPECT_EQ(gathered[static_cast<std::size_t>(r)], expected) << "from rank " << r;
    }
    // Every rank empty.
    const auto empty = comm.all_gather({});
    EXPECT_EQ(empty, std::vector<std::vector<std::byte>>(static_cast<std::size_t>(comm.size())));
  }
}

TEST(MpiCommunicator, BroadcastFromFirstAndLastRank) {
  for (const MpiCommunicatorOptions options : {MpiCommunicatorOptions{}, kSmallChunks}) {
    MpiCommunicator comm(MPI_COMM_WORLD, options);
    for (const int root : {0, comm.size() - 1}) {
      for (const std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{1000}}) {
        SCOPED_TRACE("root " + std::to_string(root) + ", " + std::to_string(n) + " bytes, max_chunk_bytes " +
                     std::to_string(options.max_chunk_bytes));
        std::vector<std::byte> expected(n);
        for (std::size_t i = 0; i < n; ++i) expected[i] = static_cast<std::byte>((i * 13 + n) & 0xff);
        // Non-roots start with other bytes and another length: both must be replaced.
        std::vector<std::byte> bytes = comm.rank() == root ? expected : std::vector<std::byte>(17, std::byte{0xee});
        comm.broadcast(bytes, root);
        EXPECT_EQ(bytes, expected);
      }
    }
  }
}

TEST(MpiCommunicator, BroadcastRefusesARootOutsideTheGroup) {
  auto comm = MpiCommunicator::world();
  std::vector<std::byte> bytes(3);
  EXPECT_THROW(comm->broadcast(bytes, comm->size()), CommunicatorError);
  EXPECT_THROW(comm->broadcast(bytes, -1), CommunicatorError);
}

TEST(MpiCommunicator, LocalRanksNumberEachHostsProcesses) {
  auto comm = MpiCommunicator::world();
  EXPECT_GE(comm->local_rank(), 0);
  EXPECT_LT(comm->local_rank(), comm->local_size());
  EXPECT_LE(comm->local_size(), comm->size());
  // Per host, the local ranks are 0 .. n-1 once each and every process there reports n.
  const std::string mine =
      comm->host() + "\n" + std::to_string(comm->local_rank()) + "\n" + std::to_string(comm->local_size());
  const auto gathered = comm->all_gather(std::as_bytes(std::span(mine)));
  std::map<std::string, std::multiset<int>> local_ranks;
  std::map<std::string, std::set<int>> local_sizes;
  for (const auto& entry : gathered) {
    std::string text(reinterpret_cast<const char*>(entry.data()), entry.size());
    const auto first = text.find('\n');
    const auto second = text.find('\n', first + 1);
    const std::string host = text.substr(0, first);
    local_ranks[host].insert(std::stoi(text.substr(first + 1, second - first - 1)));
    local_sizes[host].insert(std::stoi(text.substr(second + 1)));
  }
  for (const auto& [host, ranks] : local_ranks) {
    std::multiset<int> expected;
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r) expected.insert(r);
    EXPECT_EQ(ranks, expected) << host;
    EXPECT_EQ(local_sizes[host], std::set<int>{static_cast<int>(ranks.size())}) << host;
  }
}

TEST(MpiCommunicator, MpiErrorsBecomeCommunicatorErrorsNamingTheCall) {
  // An invalid communicator is reported on MPI_COMM_WORLD, whose handler aborts by default: let it
  // return the code for the duration of the test (no collective happens, so ranks may diverge here).
  MPI_Errhandler previous = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &previous);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  try {
    MpiCommunicator comm(MPI_COMM_NULL);
    ADD_FAILURE() << "constructed a communicator over MPI_COMM_NULL";
  } catch (const CommunicatorError& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Comm_dup failed"), std::string::npos) << e.what();
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, previous);
  MPI_Errhandler_free(&previous);
}

TEST(MpiCommunicator, RefusesAChunkSmallerThanAFloat) {
  EXPECT_THROW(MpiCommunicator(MPI_COMM_WORLD, MpiCommunicatorOptions{.max_chunk_bytes = 3}), CommunicatorError);
}

}  // namespace
