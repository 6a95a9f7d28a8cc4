// The on-disk pipeline cache file: locating, validating, reading and writing it.
#include "vk/pipeline_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace tg::vk::detail {

namespace {

constexpr char k_magic[8] = {'T', 'G', 'P', 'C', 'A', 'C', 'H', 'E'};
constexpr std::uint32_t k_format_version = 1;
// Larger than any real cache (a few MiB for every shader); a bigger file is not ours.
constexpr std::uint64_t k_max_cache_file_bytes = std::uint64_t{1} << 30;

// Host byte order is fine: the file is only ever read back on the machine (and device) it names.
struct FileHeader {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t reserved;
  std::uint64_t payload_size;
  std::uint64_t payload_hash;
};
static_assert(sizeof(FileHeader) == 32);

std::uint64_t fnv1a(std::span<const std::byte> data) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::byte b : data) {
    hash ^= static_cast<std::uint8_t>(b);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string hex(std::uint64_t value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llx", digits, static_cast<unsigned long long>(value));
  return buf;
}

// The header every VkPipelineCache blob starts with (VkPipelineCacheHeaderVersionOne).
std::string check_vulkan_header(std::span<const std::byte> blob, const DeviceInfo& device) {
  struct {
    std::uint32_t header_size, header_version, vendor_id, device_id;
    std::uint8_t uuid[VK_UUID_SIZE];
  } header;
  static_assert(sizeof(header) == 32);
  if (blob.size() < sizeof(header)) return "the driver data is shorter than its header";
  std::memcpy(&header, blob.data(), sizeof(header));
  if (header.header_size < sizeof(header) || header.header_version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE)
    return "the driver data has an unknown header";
  if (header.vendor_id != device.vendor_id || header.device_id != device.device_id ||
      std::memcmp(header.uuid, device.pipeline_cache_uuid.data(), VK_UUID_SIZE) != 0)
    return "it was written for another device or driver";
  return {};
}

}  // namespace

std::string default_pipeline_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::string(xdg) + "/tensorgrad";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/tensorgrad";
  return {};
}

std::string pipeline_cache_path(const std::string& dir, const DeviceInfo& device) {
  std::string uuid;
  for (std::uint8_t b : device.pipeline_cache_uuid) uuid += hex(b, 2);
  return dir + "/pipelines-" + hex(device.vendor_id, 4) + "-" + hex(device.device_id, 4) + "-" +
         hex(device.driver_version, 8) + "-" + uuid + ".bin";
}

LoadedPipelineCache read_pipeline_cache(const std::string& path, const DeviceInfo& device) {
  LoadedPipelineCache out;
  // Only a regular file of a plausible size is read: a FIFO or device put at the cache path must not
  // hang or exhaust memory at Context creation. O_NONBLOCK keeps open() of a FIFO from waiting for a
  // writer; fstat on the opened descriptor is the check that cannot race. The cache is only an
  // optimisation, so anything else is ignored with a reason rather than refused.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return out;
  std::string bytes;
  {
    struct stat info {};
    const bool regular = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
    const auto size = regular ? static_cast<std::uint64_t>(info.st_size) : 0;
    if (!regular || size > k_max_cache_file_bytes) {
      ::close(fd);
      out.ignored_reason = path + (regular ? ": larger than " + std::to_string(k_max_cache_file_bytes >> 20) + " MiB"
                                           : std::string(": not a regular file"));
      return out;
    }
    bytes.resize(size);
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ::ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      done += static_cast<std::size_t>(got);
    }
    ::close(fd);
    bytes.resize(done);  // a file that shrank while read fails the size check below
  }
  const auto* first = reinterpret_cast<const std::byte*>(bytes.data());
  const std::vector<std::byte> file(first, first + bytes.size());
  const auto ignore = [&](std::string reason) {
    out.ignored_reason = path + ": " + std::move(reason);
    return out;
  };
  FileHeader header;
  if (file.size() < sizeof(header)) return ignore("shorter than the tensorgrad header");
  std::memcpy(&header, file.data(), sizeof(header));
  if (std::memcmp(header.magic, k_magic, sizeof(k_magic)) != 0) return ignore("not a tensorgrad pipeline cache");
  if (header.format_version != k_format_version) return ignore("unknown format version");
  const std::span<const std::byte> payload(file.data() + sizeof(header), file.size() - sizeof(header));
  if (header.payload_size != payload.size()) return ignore("truncated or padded");
  if (header.payload_hash != fnv1a(payload)) return ignore("checksum mismatch (corrupt)");
  if (std::string reason = check_vulkan_header(payload, device); !reason.empty()) return ignore(reason);
  out.blob.assign(payload.begin(), payload.end());
  return out;
}

std::optional<std::string> write_pipeline_cache(const std::string& path, std::span<const std::byte> blob) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return "cannot create " + fs::path(path).parent_path().string() + ": " + ec.message();
  FileHeader header{};
  std::memcpy(header.magic, k_magic, sizeof(k_magic));
  header.format_version = k_format_version;
  header.payload_size = blob.size();
  header.payload_hash = fnv1a(blob);
  // A per-process temporary name: concurrent processes each rename a complete file into place.
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&header), sizeof(header));
    out.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      return "cannot write " + temp;
    }
  }
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    return "cannot rename " + temp + " to " + path + ": " + ec.message();
  }
  return std::nullopt;
}

}  // namespace tg::vk::detail
