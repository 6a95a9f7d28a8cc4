#include "train/safetensors_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "tensorgrad/train/safetensors.h"

namespace tg::safetensors_file {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw SafetensorsError("safetensors file '" + path + "': " + what);
}

std::string error_text(int err) { return std::strerror(err); }

std::string file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a special file";
}

[[noreturn]] void refuse_type(const std::string& path, mode_t mode) {
  fail(path, "cannot load: it is " + file_type_name(mode) + ", not a regular file");
}

// ------------------------------------------------------------------------------------------------
// Temporary files of saves: ".<name>.tmp-<pid>-<n>" next to the target.
// ------------------------------------------------------------------------------------------------

std::string temp_prefix(const std::filesystem::path& target) { return "." + target.filename().string() + ".tmp-"; }

// The temporary files this process is writing now (full paths), so that a save on another thread
// never takes a live one of ours for a leftover of a killed process that had our pid.
std::mutex& in_flight_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& in_flight() {
  static std::set<std::string> s;
  return s;
}

class InFlight {
 public:
  explicit InFlight(std::string temp) : temp_(std::move(temp)) {
    const std::lock_guard lock(in_flight_mutex());
    in_flight().insert(temp_);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() {
    const std::lock_guard lock(in_flight_mutex());
    in_flight().erase(temp_);
  }

 private:
  std::string temp_;
};

bool is_in_flight(const std::string& temp) {
  const std::lock_guard lock(in_flight_mutex());
  return in_flight().contains(temp);
}

// Parses "<pid>-<n>" (decimal digits only); returns the pid, or -1 when the rest does not match.
pid_t parse_temp_suffix(std::string_view rest) {
  const std::size_t dash = rest.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == rest.size() || dash > 9) return -1;
  const auto all_digits = [](std::string_view s) {
    for (const char c : s)
      if (c < '0' || c > '9') return false;
    return true;
  };
  if (!all_digits(rest.substr(0, dash)) || !all_digits(rest.substr(dash + 1))) return -1;
  pid_t pid = 0;
  for (const char c : rest.substr(0, dash)) pid = pid * 10 + (c - '0');
  return pid;
}

bool writer_is_gone(pid_t pid) {
  if (pid <= 0) return false;
  if (pid == ::getpid()) return true;  // and not in flight (checked by the caller)
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

// Removes `dir/name` if it is a regular file nobody holds the writer's lock on, and it is still the
// same file after the lock was taken.
bool remove_if_unlocked(const std::string& dir, const std::string& name) {
  const std::string full = (std::filesystem::path(dir) / name).string();
  const int fd = ::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return false;
  bool removed = false;
  struct stat held {};
  struct stat now {};
  if (::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
      ::lstat(full.c_str(), &now) == 0 && now.st_dev == held.st_dev && now.st_ino == held.st_ino) {
    removed = ::unlink(full.c_str()) == 0;
  }
  ::close(fd);  // releases the lock
  return removed;
}

// Refuses, before anything is written and again just before the rename, a target that a save must
// not replace: anything but a missing path or a regular file. Returns the file the save replaces:
// `path` itself, or for a symbolic link to a regular file the file it leads to (so that the link is
// kept and the file it names gets the new contents). A dangling link, a link loop and a link to
// anything but a regular file are refused.
std::string save_destination(const std::string& path) {
  struct stat link_info {};
  if (::lstat(path.c_str(), &link_info) != 0) {
    const int err = errno;
    if (err == ENOENT) return path;  // a new file
    fail(path, "cannot save: cannot stat the target: " + error_text(err));
  }
  if (S_ISREG(link_info.st_mode)) return path;
  if (!S_ISLNK(link_info.st_mode)) {
    fail(path, "cannot save: it is " + file_type_name(link_info.st_mode) +
                   ", not a regular file (a save only replaces a regular file)");
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int err = errno;
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(path, ec).string();
    fail(path, "cannot save: it is a symbolic link to '" + target + "', which cannot be followed (" + error_text(err) +
                   "); a save follows a link only to an existing regular file");
  }
  if (!S_ISREG(info.st_mode)) {
    fail(path, "cannot save: it is a symbolic link to " + file_type_name(info.st_mode) +
                   ", not to a regular file (a save only replaces a regular file)");
  }
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    const int err = errno;
    fail(path, "cannot save: cannot resolve the symbolic link: " + error_text(err));
  }
  return resolved;
}

// The check made again just before the rename: the destination is still missing or a regular file.
// (Not atomic with the rename: see write_atomically in the header.)
bool still_replaceable(const std::string& destination, std::string& problem) {
  struct stat info {};
  if (::lstat(destination.c_str(), &info) != 0) {
    const int err = errno;
    if (err == ENOENT) return true;
    problem = "cannot stat the target before the rename: " + error_text(err);
    return false;
  }
  if (S_ISREG(info.st_mode)) return true;
  problem = "it became " + file_type_name(info.st_mode) + " while the save was writing; it is left as it is";
  return false;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Reading.
// ------------------------------------------------------------------------------------------------

InputFile::InputFile(std::string path) : path_(std::move(path)) {
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0) {
    const int err = errno;
    fail(path_, "cannot open: " + error_text(err));
  }
  if (!S_ISREG(info.st_mode)) refuse_type(path_, info.st_mode);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    fail(path_, "cannot open: " + error_text(err));
  }
  if (::fstat(fd_, &info) != 0) {
    const int err = errno;
    ::close(fd_);
    fail(path_, "cannot stat the opened file: " + error_text(err));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    refuse_type(path_, info.st_mode);  // replaced between the stat and the open
  }
  size_ = static_cast<std::uint64_t>(info.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(std::uint64_t offset, std::span<std::uint8_t> out) const {
  if (offset > size_ || out.size() > size_ - offset) {
    fail(path_, "internal: a read of bytes " + std::to_string(offset) + ".." + std::to_string(offset + out.size()) +
                    " past the " + std::to_string(size_) + "-byte file");
  }
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      fail(path_, "cannot read: " + error_text(err));
    }
    if (n == 0) {
      fail(path_, "the file ended at byte " + std::to_string(offset + done) + ", but it had " + std::to_string(size_) +
                      " bytes when opened (it shrank while being read)");
    }
    done += static_cast<std::size_t>(n);
  }
}

void InputFile::check_unchanged() const {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const int err = errno;
    fail(path_, "cannot stat the opened file: " + error_text(err));
  }
  if (static_cast<std::uint64_t>(info.st_size) != size_) {
    fail(path_, "the file changed size while being read (" + std::to_string(size_) + " bytes at open, " +
                    std::to_string(info.st_size) + " now)");
  }
}

// ------------------------------------------------------------------------------------------------
// Writing.
// ------------------------------------------------------------------------------------------------

std::vector<std::string> remove_stale_temps(const std::string& path) {
  std::vector<std::string> removed;
  const std::filesystem::path target(path);
  if (!target.has_filename()) return removed;
  const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  const std::string prefix = temp_prefix(target);
  DIR* listing = ::opendir(dir.c_str());
  if (!listing) return removed;
  std::vector<std::string> candidates;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string_view name(entry->d_name);
    if (!name.starts_with(prefix)) continue;
    const pid_t pid = parse_temp_suffix(name.substr(prefix.size()));
    if (pid > 0) candidates.emplace_back(name);
  }
  ::closedir(listing);
  for (const std::string& name : candidates) {
    const pid_t pid = parse_temp_suffix(std::string_view(name).substr(prefix.size()));
    const std::string full = (target.parent_path() / name).string();
    if (is_in_flight(full) || !writer_is_gone(pid)) continue;
    if (remove_if_unlocked(dir, name)) removed.push_back(name);
  }
  return removed;
}

void write_atomically(const std::string& path, std::span<const std::uint8_t> bytes) {
  if (!std::filesystem::path(path).has_filename()) fail(path, "cannot save: the path names no file");
  const std::string destination = save_destination(path);
  const std::filesystem::path target(destination);
  remove_stale_temps(destination);
  static std::atomic<unsigned> counter{0};
  std::string temp;
  int fd = -1;
  // Registered before it exists, so that a concurrent save of the same target on another thread
  // never takes it for a leftover between its creation and its lock.
  std::optional<InFlight> registered;
  for (int attempt = 0; fd < 0; ++attempt) {
    temp = (target.parent_path() / (temp_prefix(target) + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
               .string();
    registered.reset();
    registered.emplace(temp);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    const int err = errno;
    if (fd < 0 && (err != EEXIST || attempt > 100)) {
      fail(path, "cannot save: cannot create '" + temp + "': " + error_text(err));
    }
  }
  // Held until the temporary file is renamed or removed: a save of the same target from another
  // process sees that this one is alive (remove_stale_temps only takes unlocked files).
  ::flock(fd, LOCK_EX | LOCK_NB);
  // Takes errno first, before building the message can disturb it.
  const auto give_up = [&](const char* step) {
    const int err = errno;
    ::unlink(temp.c_str());
    if (fd >= 0) ::close(fd);
    fail(path, "cannot save: " + std::string(step) + " '" + temp + "' failed: " + error_text(err));
  };
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) give_up("writing");
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) give_up("fsync of");
  if (std::string problem; !still_replaceable(destination, problem)) {
    ::unlink(temp.c_str());
    ::close(fd);
    fail(path, "cannot save: " + problem);
  }
  if (::rename(temp.c_str(), destination.c_str()) != 0) give_up("renaming");
  const int closing = fd;
  fd = -1;
  ::close(closing);  // the data is fsynced and in place: a failing close loses nothing
  // Make the rename itself durable. Best effort: the new file is complete and in place already,
  // and some file systems refuse fsync on a directory.
  const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace tg::safetensors_file
