// main() of tg_mpi_tests: GoogleTest on every rank of an MPI job (tests/CMakeLists.txt launches it with
// mpiexec on 2 and 3 ranks). Every test is collective: all ranks run the same tests in the same order,
// so a test must not return early on one rank (no ASSERT_* before a collective).
//
// Output: rank 0 prints GoogleTest's usual log; the other ranks print only their failures, each line
// prefixed "[rank r]", so the log stays one readable run plus what went wrong elsewhere. The exit
// code is non-zero on every rank when any rank failed, whatever the launcher reports.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "tensorgrad/distributed/mpi.h"

namespace {

// One write per message so lines from different processes do not interleave within a line.
void print_prefixed(int rank, const std::string& text) {
  std::istringstream lines(text);
  std::string out;
  for (std::string line; std::getline(lines, line);) out += "[rank " + std::to_string(rank) + "] " + line + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::string where = result.file_name() ? result.file_name() : "unknown file";
    if (result.line_number() >= 0) where += ":" + std::to_string(result.line_number());
    print_prefixed(rank_, where + ": Failure\n" + result.message());
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    print_prefixed(rank_, std::string("[  FAILED  ] ") + info.test_suite_name() + "." + info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  tg::distributed::MpiSession mpi(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  // mpiexec gives the ranks a pseudo-terminal for output, so "auto" would colour CTest's log files.
  if (GTEST_FLAG_GET(color) == "auto") GTEST_FLAG_SET(color, "no");
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // --gtest_shuffle without a seed picks one from the clock on each rank: the ranks would run the
  // tests in different orders and wait in each other's collectives. Rank 0 picks it for everyone.
  if (GTEST_FLAG_GET(shuffle) && GTEST_FLAG_GET(random_seed) == 0) {
    int seed = 0;
    if (rank == 0) {
      seed = static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count() % 99999) + 1;
    }
    MPI_Bcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    GTEST_FLAG_SET(random_seed, seed);
  }

  if (rank == 0) {
    std::printf("tg_mpi_tests: %d ranks\n", size);
    std::fflush(stdout);
  } else {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }

  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;

  std::vector<int> failed_by_rank(static_cast<std::size_t>(size));
  MPI_Gather(&failed, 1, MPI_INT, failed_by_rank.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::string failed_ranks;
    for (int r = 0; r < size; ++r) {
      if (failed_by_rank[static_cast<std::size_t>(r)])
        failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(r);
    }
    if (failed_ranks.empty()) {
      std::printf("tg_mpi_tests: every rank of %d passed\n", size);
    } else {
      std::printf("tg_mpi_tests: FAILED on rank(s) %s of %d\n", failed_ranks.c_str(), size);
    }
    std::fflush(stdout);
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed;
}
