// Safe file input (issue 15): safetensors loads read regular files only and never block (a FIFO,
// a directory, a device are refused by type), every length is bounded by the file's own size,
// Training::load validates every metadata field and value and changes nothing when it refuses, a
// save removes the temporary files of killed earlier saves (and only those), and NaN/Inf params
// are refused unless the spec opts in.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("tg_safe_input_" + std::to_string(::getpid()) + "_" + test->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// 8-byte little-endian length (which may lie), then the header text, then the data.
Bytes raw_file(const std::string& header, const Bytes& data, std::uint64_t length) {
  Bytes out(8 + header.size());
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(length >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + 8);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// Runs `load` and expects a SafetensorsError whose message holds every one of `words`.
void expect_refused(const std::function<void()>& load, const std::vector<std::string>& words) {
  try {
    load();
    ADD_FAILURE() << "expected a SafetensorsError";
  } catch (const SafetensorsError& e) {
    for (const std::string& word : words) EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a SafetensorsError, got " << typeid(e).name() << ": " << e.what();
  }
}

// ------------------------------------------------------------------------------------------------
// File types and sizes.
// ------------------------------------------------------------------------------------------------

TEST(SafeFileInput, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& load :
       std::vector<std::function<void()>>{[&] { load_safetensors(fifo); },
                                          [&] {
                                            load_matching(fifo, {{"a", TensorType{DType::f32, {1}}}});
                                          }}) {
    std::future<void> done = std::async(std::launch::async, [&] { expect_refused(load, {fifo, "FIFO"}); });
    if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // A blocked open or read: give it a writer that closes at once (EOF), then fail.
      const int writer = ::open(fifo.c_str(), O_WRONLY);
      if (writer >= 0) ::close(writer);
      done.wait();
      FAIL() << "loading a FIFO blocked";
    }
    done.get();
  }
}

TEST(SafeFileInput, DirectoriesAndDevicesAreRefusedByType) {
  TempDir dir;
  fs::create_directories(dir.file("ckpt.safetensors"));
  expect_refused([&] { load_safetensors(dir.file("ckpt.safetensors")); }, {"ckpt.safetensors", "a directory"});
  // /dev/zero would be read forever by a read-to-EOF loader.
  for (const char* device : {"/dev/zero", "/dev/null"}) {
    if (!fs::exists(device)) continue;
    expect_refused([&] { load_safetensors(device); }, {device, "a character device"});
  }
}

TEST(SafeFileInput, SymlinkToARegularFileIsRead) {
  TempDir dir;
  save_safetensors(dir.file("real.safetensors"), {{"a", HostTensor::f32({2}, {1.f, 2.f})}});
  fs::create_symlink(dir.file("real.safetensors"), dir.file("link.safetensors"));
  EXPECT_EQ(load_safetensors(dir.file("link.safetensors")).tensors.at("a").to_f64(), (std::vector<double>{1, 2}));
}

TEST(SafeFileInput, LengthsAreBoundedByTheFileSize) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const Bytes data(8, 0);
  write_bytes(path, raw_file(header, data, header.size()));
  ASSERT_EQ(load_safetensors(path).tensors.at("a").to_f64(), (std::vector<double>{0, 0})) << "the base file is valid";

  write_bytes(path, raw_file(header, data, 1000));  // past the end, under the cap
  expect_refused([&] { load_safetensors(path); }, {path, "header length 1000 runs past the end", "-byte file"});
  write_bytes(path, raw_file(header, data, std::numeric_limits<std::uint64_t>::max()));  // no allocation
  expect_refused([&] { load_safetensors(path); }, {"is over the limit of 100000000 bytes"});
  write_bytes(path, raw_file(header, Bytes(4, 0), header.size()));  // truncated data
  expect_refused([&] { load_safetensors(path); }, {"data_offsets [0, 8] run past the end of the 4-byte data"});
  const std::string far = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,800000000000]}})";
  write_bytes(path, raw_file(far, data, far.size()));
  expect_refused([&] { load_safetensors(path); }, {"run past the end"});
  write_bytes(path, Bytes{3, 0, 0});
  expect_refused([&] { load_safetensors(path); }, {"fewer than the 8-byte header length"});
  // An empty tensor whose other dims multiply past tensorgrad's size limit (kMaxElements): zero
  // bytes on disk, but no tensor of that shape can exist in the library.
  const std::string huge = R"({"a":{"dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}})";
  write_bytes(path, raw_file(huge, {}, huge.size()));
  expect_refused([&] { load_safetensors(path); },
                 {path, "tensor 'a'", "[0,1099511627776,1099511627776] has too many elements"});
}

// ------------------------------------------------------------------------------------------------
// Training::load: metadata, names, values; nothing changes on a refusal.
// ------------------------------------------------------------------------------------------------

struct Net : Module {
  Linear l1{*this, "l1", 2, 3};
  Linear l2{*this, "l2", 3, 1};
};

Tensor net_loss(const Net& m, const Inputs& in) {
  Tensor r = m.l2(relu(m.l1(in.at("x")))) - in.at("y");
  return mean(r * r);
}

TensorMap batch() {
  return {{"x", HostTensor::f32({4, 2}, {0.1f, -0.4f, 0.7f, 0.2f, -0.9f, 0.5f, 0.3f, 0.3f})},
          {"y", HostTensor::f32({4, 1}, {0.2f, -0.1f, 0.4f, 0.0f})}};
}

TrainingSpec<Net> spec(const Net& model, bool allow_nonfinite = false) {
  return {.model = model,
          .loss = net_loss,
          .inputs = {{"x", {{4, 2}}}, {"y", {{4, 1}}}},
          .optimizer = {.kind = AdamConfig{}},
          .lr = 0.01,
          .seed = 5,
          .allow_nonfinite_params = allow_nonfinite};
}

// What a refused load must leave exactly as it was.
struct State {
  TensorMap params, optimizer;
  std::int64_t steps;
  friend bool operator==(const State&, const State&) = default;
};
State state_of(const Training& t) { return {t.download_param_tensors(), t.download_optimizer_state(), t.steps()}; }

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int s = 0; s < 2; ++s) ASSERT_TRUE(train.step(batch()).ok());
    train.save(good);
    checkpoint = load_safetensors(good);
    before = state_of(train);
  }
  // Saves `file` as a checkpoint and expects train.load to refuse it with `words`, unchanged.
  void expect_load_refused(const SafetensorsFile& file, const std::vector<std::string>& words) {
    save_safetensors(bad, file.tensors, file.metadata);
    expect_load_refused_raw(words);
  }
  void expect_load_refused_raw(const std::vector<std::string>& words) {
    expect_refused([&] { train.load(bad); }, words);
    EXPECT_TRUE(state_of(train) == before) << "a refused load changed the training";
  }
  TempDir dir;
  Net model;
  Training train = compile(spec(model));
  std::string good = dir.file("good.safetensors"), bad = dir.file("bad.safetensors");
  SafetensorsFile checkpoint;
  State before;
};

TEST_F(CheckpointTest, StepCounterMustBeACountThatCannotOverflow) {
  for (const std::string step : {"9223372036854775807", "9007199254740993", "-1", "", "1e3", " 5", "+5", "5 ", "0x10",
                                 "99999999999999999999999"}) {
    SafetensorsFile file = checkpoint;
    file.metadata["tensorgrad.step"] = step;
    expect_load_refused(file, {bad, "tensorgrad.step", "\"" + step + "\"", "[0, 9007199254740992]"});
  }
  SafetensorsFile file = checkpoint;
  file.metadata.erase("tensorgrad.step");
  expect_load_refused(file, {"not a training checkpoint", "tensorgrad.step"});

  // The largest allowed step loads, and the next step still counts up.
  file = checkpoint;
  file.metadata["tensorgrad.step"] = std::to_string(kMaxTrainingSteps);
  save_safetensors(bad, file.tensors, file.metadata);
  train.load(bad);
  EXPECT_EQ(train.steps(), kMaxTrainingSteps);
}

TEST_F(CheckpointTest, OtherMetadataIsValidated) {
  SafetensorsFile file = checkpoint;
  file.metadata["tensorgrad.seed"] = "-3";
  expect_load_refused(file, {"tensorgrad.seed", "\"-3\""});
  file = checkpoint;
  file.metadata["tensorgrad.lr"] = "0.1";
  expect_load_refused(file, {"unknown metadata 'tensorgrad.lr'"});
  // Keys outside our namespace are the user's (e.g. PyTorch's "format"): accepted.
  file = checkpoint;
  file.metadata["format"] = "pt";
  save_safetensors(bad, file.tensors, file.metadata);
  train.load(bad);
  EXPECT_EQ(train.steps(), 2);
}

TEST_F(CheckpointTest, TensorNamesTypesAndDtypesAreChecked) {
  SafetensorsFile file = checkpoint;
  file.tensors.emplace("l3.W", HostTensor::f32({1}, {0.f}));
  expect_load_refused(file, {"unexpected: 'l3.W'"});
  file = checkpoint;
  file.tensors.erase("l1.W.adam.v");
  expect_load_refused(file, {"missing: 'l1.W.adam.v'"});
  file = checkpoint;
  file.tensors.insert_or_assign("l1.b", HostTensor::f32({4}, {0, 0, 0, 0}));
  expect_load_refused(file, {"'l1.b': expected f32[3], found f32[4]"});

  // Raw edits of the header, same length: an unknown dtype, a name given twice.
  const Bytes bytes = read_bytes(good);
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string text(bytes.begin(), bytes.end());
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    write_bytes(bad, Bytes(text.begin(), text.end()));
  };
  edited("\"dtype\":\"F32\"", "\"dtype\":\"X32\"");
  expect_load_refused_raw({bad, "dtype \"X32\""});
  edited("\"l1.b\":", "\"l1.W\":");
  expect_load_refused_raw({bad, "duplicate", "l1.W"});

  // A truncated checkpoint.
  write_bytes(bad, Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() / 2)));
  expect_load_refused_raw({bad, "past the end"});
}

TEST_F(CheckpointTest, AdamSecondMomentMustNotBeNegative) {
  SafetensorsFile file = checkpoint;
  file.tensors.at("l2.W.adam.v").set(1, -0.5);
  expect_load_refused(file, {"'l2.W.adam.v' element 1", "never negative"});
}

TEST_F(CheckpointTest, NonFiniteValuesAreRefusedUnlessAllowed) {
  for (const double value : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    SafetensorsFile file = checkpoint;
    file.tensors.at("l1.W").set(4, value);
    expect_load_refused(file, {"tensor 'l1.W' element 4", "not finite", "allow_nonfinite_params"});
    file = checkpoint;
    file.tensors.at("l1.W.adam.m").set(2, -value);
    expect_load_refused(file, {"tensor 'l1.W.adam.m' element 2", "not finite"});
  }
  SafetensorsFile file = checkpoint;
  file.tensors.at("l1.W").set(4, std::numeric_limits<double>::infinity());
  save_safetensors(bad, file.tensors, file.metadata);
  Training permissive = compile(spec(model, /*allow_nonfinite=*/true));
  permissive.load(bad);
  EXPECT_TRUE(std::isinf(permissive.download_params().at("l1.W")[4]));
}

TEST_F(CheckpointTest, FifoCheckpointIsRefusedAndNothingChanges) {
  const std::string fifo = dir.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::future<void> done = std::async(std::launch::async, [&] { expect_refused([&] { train.load(fifo); }, {"FIFO"}); });
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    const int writer = ::open(fifo.c_str(), O_WRONLY);
    if (writer >= 0) ::close(writer);
    done.wait();
    FAIL() << "Training::load of a FIFO blocked";
  }
  done.get();
  EXPECT_TRUE(state_of(train) == before);
}

// ------------------------------------------------------------------------------------------------
// upload_params: NaN/Inf refused unless allowed; nothing written on a refusal.
// ------------------------------------------------------------------------------------------------

TEST(SafeFileInput, UploadRefusesNonFiniteParamsUnlessAllowed) {
  Net model;
  Training train = compile(spec(model));
  Forward forward = train.attach(ForwardSpec<Net>{
      .forward = [](const Net& m, const Inputs& in) { return m.l1(in.at("x")); }, .inputs = {{"x", {{-1, 2}}}}});
  const ParamValues before = train.download_params();
  ParamValues values = before;
  values.at("l1.b")[2] = std::numeric_limits<float>::quiet_NaN();
  values.at("l2.W")[0] = -std::numeric_limits<float>::infinity();
  for (const auto& upload : std::vector<std::function<void()>>{[&] { train.upload_params(values); },
                                                               [&] { forward.upload_params(values); }}) {
    try {
      upload();
      ADD_FAILURE() << "a NaN param was uploaded";
    } catch (const RuntimeError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("param 'l1.b' element 2 is nan"), std::string::npos) << message;
      EXPECT_NE(message.find("param 'l2.W' element 0 is -inf"), std::string::npos) << message;
      EXPECT_NE(message.find("nothing was written"), std::string::npos) << message;
    }
    EXPECT_EQ(train.download_params(), before) << "a refused upload wrote something";
  }
  ASSERT_TRUE(train.step(batch()).ok());

  Training permissive = compile(spec(model, /*allow_nonfinite=*/true));
  permissive.upload_params(values);
  EXPECT_TRUE(std::isnan(permissive.download_params().at("l1.b")[2]));
  EXPECT_EQ(permissive.step(batch()).failure().kind, "nonfinite") << "the caller opted in to what follows";
}

// ------------------------------------------------------------------------------------------------
// Temporary files of killed saves.
// ------------------------------------------------------------------------------------------------

pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(SafeFileInput, SaveRemovesTheTemporaryFilesOfKilledSaves) {
  TempDir dir;
  const std::string target = dir.file("ckpt.safetensors");
  const std::string dead = std::to_string(dead_pid()), ours = std::to_string(::getpid());
  const Bytes junk(4096, 7);
  // Left by killed saves of this target: a dead writer, and an earlier process that had our pid.
  const std::vector<std::string> stale = {".ckpt.safetensors.tmp-" + dead + "-0",
                                          ".ckpt.safetensors.tmp-" + dead + "-17",
                                          ".ckpt.safetensors.tmp-" + ours + "-999999"};
  // Not ours to remove: another target's, a live writer's (pid 1), a locked one (a live save holds
  // the lock), names that only look similar, a directory, a symlink.
  const std::string locked = ".ckpt.safetensors.tmp-" + dead + "-5";
  const std::string directory = ".ckpt.safetensors.tmp-" + dead + "-3",
                    symlink = ".ckpt.safetensors.tmp-" + dead + "-4";
  const std::vector<std::string> kept_files = {
      ".other.safetensors.tmp-" + dead + "-0", ".ckpt.safetensors.tmp-1-0",     locked,
      ".ckpt.safetensors.tmp-" + dead + "-0x", ".ckpt.safetensors.tmp-" + dead, "ckpt.safetensors.tmp-" + dead + "-0"};
  for (const std::string& name : stale) write_bytes(dir.file(name), junk);
  for (const std::string& name : kept_files) write_bytes(dir.file(name), junk);
  fs::create_directory(dir.file(directory));
  fs::create_symlink(dir.file("elsewhere"), dir.file(symlink));
  const int holder = ::open(dir.file(locked).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(::flock(holder, LOCK_EX), 0);  // as a live save holds its temporary file

  save_safetensors(target, {{"a", HostTensor::f32({1}, {1.f})}});
  ::close(holder);

  std::vector<std::string> expected = kept_files;
  expected.insert(expected.end(), {"ckpt.safetensors", directory, symlink});
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(dir.listing(), expected);
  EXPECT_EQ(read_bytes(dir.file(kept_files[0])), junk) << "another target's temporary file is untouched";
  EXPECT_EQ(load_safetensors(target).tensors.at("a").to_f64(), std::vector<double>{1});
}

TEST(SafeFileInput, ConcurrentSavesOfOneTargetNeverRemoveEachOthersTemporaryFiles) {
  TempDir dir;
  const std::string target = dir.file("shared.safetensors");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        try {
          save_safetensors(target, {{"a", HostTensor::f32({256}, std::vector<float>(256, static_cast<float>(t)))}});
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"shared.safetensors"});
  EXPECT_EQ(load_safetensors(target).tensors.at("a").size(), 256U);
}

}  // namespace
}  // namespace tg
