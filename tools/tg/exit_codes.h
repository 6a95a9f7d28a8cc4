#pragma once
// The exit codes of `tg`, in one place (docs/cli.md, "Exit codes"): a script can tell a failed
// check from a bad file from a missing GPU without reading the messages.
#include <stdexcept>
#include <string>

namespace tg::cli {

enum ExitCode : int {
  kOk = 0,
  kCheckFailed = 1,         // tg check: some output outside its tolerance
  kUsage = 2,               // bad command line: unknown subcommand or option, missing or invalid value
  kBadInput = 3,            // a graph or inputs file missing, unreadable, unparsable, or not matching the graph
  kBackendUnavailable = 4,  // no Vulkan loader or device, a device limit, a lost device, an op without a kernel
  kRunFailed = 5,           // the graph ran but an op refused a value (an index out of range, ...)
  kOutOfMemory = 6,         // the host could not allocate an input or a value (the message says which, and its bytes)
};

// An error the tool reports and exits with: `code` is the exit code, the message names the file,
// input or backend concerned (and carries the library error's text).
class ToolError : public std::runtime_error {
 public:
  ToolError(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

}  // namespace tg::cli
