#pragma once
// The file side of safetensors (internal to src/train): reading a regular file within the bounds of
// its own size, and replacing a file atomically while cleaning up the temporary files that earlier,
// killed saves of the same target left behind. Every error is a SafetensorsError whose message
// starts with "safetensors file '<path>': ".
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tg::safetensors_file {

// A regular file open for reading. The constructor refuses anything else (a directory, a FIFO, a
// device, a socket) without blocking: it checks the path with stat() first, so that no device is
// even opened, then opens with O_NONBLOCK (an open of a FIFO swapped in after the stat cannot hang)
// and checks the opened descriptor with fstat(), which is the check that counts.
class InputFile {
 public:
  explicit InputFile(std::string path);
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  const std::string& path() const { return path_; }
  // The size fstat() reported at open: every length the file claims is bounded by it.
  std::uint64_t size() const { return size_; }
  // Exactly out.size() bytes at `offset`; offset + out.size() must be <= size(). A file that ends
  // sooner (it shrank since the open) is an error.
  void read_at(std::uint64_t offset, std::span<std::uint8_t> out) const;
  // Throws if the file's size is no longer size() (it was written to while being read).
  void check_unchanged() const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// Replaces `path` with `bytes` through a temporary file in the same directory, named
// ".<name>.tmp-<pid>-<n>", fsynced and renamed over the target; on any failure the temporary file
// is removed and the target is untouched. Before writing, removes the temporary files of earlier
// saves of the same target whose writer is gone (see remove_stale_temps).
//
// Only a missing path or a regular file is replaced: a directory, FIFO, device or socket at `path`
// is refused (SafetensorsError) before anything is written. A symbolic link to a regular file is
// followed: the file it leads to is replaced (the temporary file goes into that file's directory)
// and the link stays. A dangling link, a link loop, and a link to anything but a regular file are
// refused. The check is made before writing and again just before the rename, but it is not
// atomic with the rename: a path swapped for a special file between that last check and the rename
// is still replaced (POSIX has no rename that replaces only a regular file).
void write_atomically(const std::string& path, std::span<const std::uint8_t> bytes);

// Removes, from the directory of `path`, the temporary files ".<name>.tmp-<pid>-<n>" of `path`
// whose save can no longer finish: a regular file (not a link), not one this process is writing,
// whose writer's pid is not a live process (kill(pid, 0) fails with ESRCH; pid == ours counts as
// dead when this process is not writing it) and on which nobody holds the lock a writer keeps for
// the whole save. Best effort: errors are ignored (the save goes on). Returns the names removed.
std::vector<std::string> remove_stale_temps(const std::string& path);

}  // namespace tg::safetensors_file
