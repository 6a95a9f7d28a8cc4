// tg_mpi_lost_rank exit|kill: what happens to a job when one rank dies between collectives (CTests
// mpi.lost_rank and mpi.killed_rank, through expect_job_ends.sh). Every rank runs a few sums, then
// rank 1 exits with code 3 without MPI_Finalize ("exit") or is killed by SIGKILL, as the OOM killer
// would ("kill"), while the others enter the next sum, which can never complete. The job must end,
// non-zero and naming the lost rank, instead of leaving the others waiting forever: in training
// this is a worker lost mid-step.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "tensorgrad/distributed/mpi.h"

int main(int argc, char** argv) {
  tg::distributed::MpiSession mpi(&argc, &argv);
  const std::string_view how = argc > 1 ? argv[1] : "exit";
  if (how != "exit" && how != "kill") {
    std::fprintf(stderr, "usage: tg_mpi_lost_rank exit|kill\n");
    return 2;
  }
  auto comm = tg::distributed::MpiCommunicator::world();
  if (comm->size() < 2) {
    std::fprintf(stderr, "tg_mpi_lost_rank: needs at least 2 ranks, got %d\n", comm->size());
    return 2;
  }
  std::vector<float> values(1000, 1.0f);
  for (int step = 0; step < 3; ++step) comm->sum_in_rank_order(values);
  std::printf("tg_mpi_lost_rank: %s finished 3 sums\n", comm->describe().c_str());
  std::fflush(stdout);

  if (comm->rank() == 1) {
    std::printf("tg_mpi_lost_rank: rank 1 %s\n",
                how == "exit" ? "exits with code 3 without MPI_Finalize" : "kills itself with SIGKILL");
    std::fflush(stdout);
    if (how == "kill") std::raise(SIGKILL);
    std::_Exit(3);
  }
  comm->sum_in_rank_order(values);  // waits for rank 1, which is gone
  std::printf("tg_mpi_lost_rank: %s completed a sum without rank 1\n", comm->describe().c_str());
  return 0;
}
