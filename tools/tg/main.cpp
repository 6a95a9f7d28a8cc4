// tg: run, check, benchmark and draw tensorgrad graph files from the command line (docs/cli.md).
//
//   tg run GRAPH --backend vulkan|interp_f32|interp_f64 [--inputs F.safetensors] [--out F.safetensors]
//   tg check GRAPH --backend vulkan|interp_f32|interp_f64
//   tg bench GRAPH --backend ... [--repetitions N] [--json FILE]
//   tg dot GRAPH
//   tg devices
//
// Exit codes are in exit_codes.h; every error is one line on stderr naming the file, input or
// backend and carrying the library's typed error text.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <vector>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"
#include "tensorgrad/ir/error.h"

int main(int argc, char** argv) {
  using namespace tg::cli;
  CLI::App tool{
      "tg: run, check and benchmark tensorgrad graph files.\n"
      "Exit codes: 0 ok, 1 check failed, 2 usage error, 3 bad graph or input file, 4 backend "
      "unavailable, 5 run failed, 6 out of host memory. See docs/cli.md.",
      "tg"};
  tool.require_subcommand(1);
  const std::vector<Command> commands = {add_run_command(tool), add_check_command(tool), add_bench_command(tool),
                                         add_dot_command(tool), add_devices_command(tool)};
  require_plain_numbers(tool);
  try {
    tool.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help (and CallForAllHelp) exit 0 through here; every other parse error is a usage error.
    const int rc = tool.exit(e);
    return rc == 0 ? kOk : kUsage;
  }
  try {
    for (const Command& command : commands) {
      if (command.app->parsed()) return command.run();
    }
    std::fprintf(stderr, "tg: no subcommand (see tg --help)\n");
    return kUsage;
  } catch (const ToolError& e) {
    std::fprintf(stderr, "tg: error: %s\n", e.what());
    return e.code();
  } catch (const tg::Error& e) {
    std::fprintf(stderr, "tg: error: %s\n", e.what());
    return exit_code_for(e);
  } catch (const std::bad_alloc&) {
    // The allocations tg can name (drawn inputs, a run's values) are reported where they happen.
    std::fprintf(stderr, "tg: error: out of host memory\n");
    return kOutOfMemory;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tg: internal error: %s\n", e.what());
    return kRunFailed;
  }
}
