#pragma once
// The subcommands of `tg`, one file each (run.cpp, check.cpp, bench.cpp, info.cpp). Each registers
// its options on the tool's CLI11 app and returns the action main() calls when it was chosen; the
// action returns an exit code (exit_codes.h) or throws ToolError.
#include <functional>

namespace CLI {
class App;
}

namespace tg::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_run_command(CLI::App& tool);
Command add_check_command(CLI::App& tool);
Command add_bench_command(CLI::App& tool);
Command add_dot_command(CLI::App& tool);
Command add_devices_command(CLI::App& tool);

}  // namespace tg::cli
