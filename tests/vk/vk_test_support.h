#pragma once
// Shared by the vk tests: a fixture that skips when the machine has no usable Vulkan device, makes
// contexts that collect every validation message (those reported during destruction too), and
// fails the test on any of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tensorgrad/vk/context.h"
#include "vk/device_select.h"

namespace tg::vk::testing {

// Whether two value lists hold the same bits (NaNs included). An empty vector's data() may be null,
// and memcmp with a null pointer is undefined even for 0 bytes (UBSan reports it), so sizes first.
inline bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// Every test that touches a device ends with this (the fixture's TearDown repeats it for messages
// reported after the test body, when the context is destroyed).
#define EXPECT_NO_VALIDATION_MESSAGES(ctx)                                      \
  EXPECT_TRUE((ctx)->validation_messages().empty()) << "validation messages:\n" \
                                                    << ::tg::vk::testing::join_lines((ctx)->validation_messages())

class VkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<DeviceInfo> devices = list_devices();
    if (std::none_of(devices.begin(), devices.end(), [](const DeviceInfo& d) { return d.usable; })) {
      GTEST_SKIP() << "no usable Vulkan device on this machine. " << detail::no_device_advice();
    }
  }

  void TearDown() override {
    std::lock_guard lock(log_->mutex);
    EXPECT_TRUE(log_->messages.empty()) << "validation messages (including during destruction):\n"
                                        << join_lines(log_->messages);
  }

  // Drops the messages collected so far (for a test that provokes one on purpose).
  void forget_validation_messages() {
    std::lock_guard lock(log_->mutex);
    log_->messages.clear();
  }

  // A context that reports into this test's log. The pipeline cache file is off unless a test asks
  // for one, so tests do not write into the user's cache directory.
  std::shared_ptr<Context> make_context(ContextOptions options = {}) {
    if (!options.pipeline_cache_dir) options.pipeline_cache_dir = "";
    options.on_validation_message = [log = log_](const std::string& message) {
      std::lock_guard lock(log->mutex);
      log->messages.push_back(message);
    };
    std::shared_ptr<Context> ctx = Context::create(std::move(options));
    const char* env = std::getenv("TG_VK_VALIDATION");
    if (env && std::string(env) == "1") {
      EXPECT_TRUE(ctx->validation_enabled()) << "TG_VK_VALIDATION=1 but the validation layer is off";
    }
    return ctx;
  }

 private:
  struct Log {
    std::mutex mutex;
    std::vector<std::string> messages;
  };
  std::shared_ptr<Log> log_ = std::make_shared<Log>();
};

// A VkTest for f16/bf16 graphs: ctx_ is this test's context, and the test is skipped on a device
// without storageBuffer16BitAccess, where 16-bit graphs are refused
// (PrecisionVkDevice.GraphsWith16BitValuesNeed16BitStorage checks the refusal).
class SixteenBitVkTest : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    if (IsSkipped()) return;
    ctx_ = make_context();
    if (!ctx_->info().storage_buffer_16bit_access) {
      GTEST_SKIP() << ctx_->info().summary() << " has no storageBuffer16BitAccess: 16-bit graphs are refused there";
    }
  }

  std::shared_ptr<Context> ctx_;
};

// Sets an environment variable for one scope and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace tg::vk::testing
