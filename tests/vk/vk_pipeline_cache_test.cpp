// The on-disk pipeline cache: written at context teardown, reused by the next context (a cache hit
// where the driver reports creation feedback), and ignored when corrupt or from another device.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tensorgrad/vk/context.h"
#include "vk/compute.h"
#include "vk/pipeline_cache.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::ScopedEnv;
using testing::VkTest;

// A fresh directory under the test's temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tg-vk-cache-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class PipelineCacheTest : public VkTest {
 protected:
  ContextOptions options() const {
    ContextOptions o;
    o.pipeline_cache_dir = dir_.path();
    return o;
  }
  TempDir dir_;
};

TEST_F(PipelineCacheTest, FileIsWrittenAndReusedBySecondContext) {
  std::string path;
  {
    auto ctx = make_context(options());
    path = ctx->pipeline_cache_status().path;
    EXPECT_EQ(path.rfind(dir_.path() + "/pipelines-", 0), 0u) << path;
    EXPECT_FALSE(ctx->pipeline_cache_status().loaded);
    EXPECT_TRUE(ctx->pipeline_cache_status().ignored_reason.empty());
    ComputePipeline add(ctx, "add", 3, 4);
    if (add.cache_hit()) {
      EXPECT_FALSE(*add.cache_hit()) << "an empty cache cannot hit";
    }
    EXPECT_NO_VALIDATION_MESSAGES(ctx);
  }  // the context saves on destruction
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const std::vector<char> first = read_file(path);
  EXPECT_GE(first.size(), 64u);  // our 32-byte header + at least the driver's 32-byte header

  auto ctx = make_context(options());
  const PipelineCacheStatus& status = ctx->pipeline_cache_status();
  EXPECT_TRUE(status.loaded) << status.ignored_reason;
  EXPECT_EQ(status.loaded_bytes + 32, first.size());  // the file is our 32-byte header + the blob
  ComputePipeline add(ctx, "add", 3, 4);
  std::cout << "driver cache data: " << status.loaded_bytes << " bytes; creation feedback: "
            << (add.cache_hit() ? (*add.cache_hit() ? "cache hit" : "cache miss") : "not reported") << "\n";
  // A driver that keeps pipelines in its cache data (more than the 32-byte header) and reports
  // creation feedback must report a hit. Lavapipe in Mesa 22.3 stores only the header, so there the
  // test can check only that the file was read back and handed to the driver.
  if (add.cache_hit() && status.loaded_bytes > 32) {
    EXPECT_TRUE(*add.cache_hit()) << "the second creation should come from the cache";
  }
  // Nothing new was compiled, so saving leaves the file as it was.
  EXPECT_TRUE(ctx->save_pipeline_cache()) << ctx->pipeline_cache_status().save_error;
  EXPECT_EQ(read_file(path), first);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(PipelineCacheTest, CorruptOrForeignFilesAreIgnored) {
  std::string path;
  {
    auto ctx = make_context(options());
    path = ctx->pipeline_cache_status().path;
    EXPECT_NO_VALIDATION_MESSAGES(ctx);
  }
  const auto expect_ignored = [&](const std::string& reason_part) {
    auto ctx = make_context(options());
    const PipelineCacheStatus& status = ctx->pipeline_cache_status();
    EXPECT_FALSE(status.loaded);
    EXPECT_NE(status.ignored_reason.find(reason_part), std::string::npos) << status.ignored_reason;
    ComputePipeline add(ctx, "add", 3, 4);  // still works with an empty cache
    EXPECT_NO_VALIDATION_MESSAGES(ctx);
  };

  std::filesystem::create_directories(dir_.path());
  std::ofstream(path, std::ios::binary) << "garbage that is not a pipeline cache at all, long enough";
  expect_ignored("not a tensorgrad pipeline cache");

  // A valid file (rewritten by the last context), then truncated by one byte.
  std::vector<char> good = read_file(path);
  ASSERT_GE(good.size(), 64u);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(good.data(), std::streamsize(good.size() - 1));
  expect_ignored("truncated");

  // A well-formed file whose driver blob names another vendor, as if copied from another machine.
  std::vector<std::byte> blob(good.size() - 32);
  std::memcpy(blob.data(), good.data() + 32, blob.size());
  const std::uint32_t other_vendor = 0xBADu;
  std::memcpy(blob.data() + 8, &other_vendor, sizeof other_vendor);
  ASSERT_FALSE(detail::write_pipeline_cache(path, blob).has_value());
  expect_ignored("another device");
}

TEST(PipelineCacheFile, DefaultDirectoryFollowsXdgThenHome) {
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg/cache");
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(detail::default_pipeline_cache_dir(), "/xdg/cache/tensorgrad");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/is/ignored");  // the XDG spec says so
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(detail::default_pipeline_cache_dir(), "/home/someone/.cache/tensorgrad");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", nullptr);
    EXPECT_EQ(detail::default_pipeline_cache_dir(), "");
  }
}

TEST(PipelineCacheFile, NameCarriesVendorDeviceDriverAndUuid) {
  DeviceInfo info;
  info.vendor_id = 0x10de;
  info.device_id = 0x2335;
  info.driver_version = 0x12345678;
  for (std::size_t i = 0; i < info.pipeline_cache_uuid.size(); ++i) info.pipeline_cache_uuid[i] = std::uint8_t(i);
  EXPECT_EQ(detail::pipeline_cache_path("/c", info),
            "/c/pipelines-10de-2335-12345678-000102030405060708090a0b0c0d0e0f.bin");
}

TEST(PipelineCacheFile, MissingFileIsNotAnError) {
  const detail::LoadedPipelineCache loaded = detail::read_pipeline_cache("/nonexistent/dir/file.bin", DeviceInfo{});
  EXPECT_TRUE(loaded.blob.empty());
  EXPECT_TRUE(loaded.ignored_reason.empty());
}

// A FIFO, a directory or a device at the cache path is ignored with a reason: reading a FIFO to EOF
// would wait for a writer forever, so the file type is checked on the descriptor before any read.
TEST(PipelineCacheFile, NonRegularFilesAreIgnoredWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.path() + "/fifo.bin";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, dir.path(), std::string("/dev/zero")}) {
    const detail::LoadedPipelineCache loaded = detail::read_pipeline_cache(path, DeviceInfo{});
    EXPECT_TRUE(loaded.blob.empty()) << path;
    EXPECT_NE(loaded.ignored_reason.find("not a regular file"), std::string::npos) << loaded.ignored_reason;
  }
}

}  // namespace
}  // namespace tg::vk
