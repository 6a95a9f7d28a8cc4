// What a save may replace: save_safetensors and Training::save replace a missing path or a regular
// file only. A FIFO, a device node, a directory is refused and left as it was (an atomic rename
// would otherwise put a regular file in its place: as root, /dev/null itself). A symbolic link to a
// regular file is followed (the file it names gets the new contents, the link stays); a dangling
// link, a link loop and a link to anything else are refused. No refused save leaves a temporary
// file behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("tg_safe_output_" + std::to_string(::getpid()) + "_" + test->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Every entry, temporary files of saves (".<name>.tmp-...") included.
  std::vector<std::string> listing(const std::string& sub = "") const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path_ / sub)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

const TensorMap& new_tensors() {
  static const TensorMap tensors = {{"a", HostTensor::f32({2}, {1.f, 2.f})}};
  return tensors;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `save` and expects a SafetensorsError whose message holds every one of `words`.
void expect_refused(const std::function<void()>& save, const std::vector<std::string>& words) {
  try {
    save();
    ADD_FAILURE() << "expected a SafetensorsError";
  } catch (const SafetensorsError& e) {
    for (const std::string& word : words) EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a SafetensorsError, got " << typeid(e).name() << ": " << e.what();
  }
}

struct stat lstat_of(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::lstat(path.c_str(), &info), 0) << path << ": " << std::strerror(errno);
  return info;
}

TEST(SafeFileOutput, AFifoIsRefusedAndStaysAFifo) {
  TempDir dir;
  const std::string fifo = dir.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  expect_refused([&] { save_safetensors(fifo, new_tensors()); },
                 {fifo, "cannot save", "a FIFO (named pipe), not a regular file"});
  EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"pipe.safetensors"}) << "a temporary file was left behind";
}

TEST(SafeFileOutput, ADeviceNodeIsRefusedAndStaysADevice) {
  TempDir dir;
  const std::string device = dir.file("null.safetensors");
  // /dev/null's numbers, made here so that a broken save could replace only this copy.
  if (::mknod(device.c_str(), S_IFCHR | 0600, ::makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod of a character device failed (" << std::strerror(errno)
                 << "): this test needs root or CAP_MKNOD";
  }
  expect_refused([&] { save_safetensors(device, new_tensors()); }, {device, "a character device, not a regular file"});
  const struct stat after = lstat_of(device);
  EXPECT_TRUE(S_ISCHR(after.st_mode)) << "the device node was replaced";
  EXPECT_EQ(after.st_rdev, ::makedev(1, 3));
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"null.safetensors"});
}

TEST(SafeFileOutput, ADirectoryIsRefusedWithItsContents) {
  TempDir dir;
  const std::string target = dir.file("ckpt.safetensors");
  fs::create_directories(target);
  std::ofstream(target + "/inside") << "kept";
  expect_refused([&] { save_safetensors(target, new_tensors()); }, {target, "a directory, not a regular file"});
  EXPECT_EQ(text_of(target + "/inside"), "kept");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST(SafeFileOutput, ALinkToARegularFileReplacesThatFileAndKeepsTheLink) {
  TempDir dir;
  // A relative link into another directory: the file is replaced where it is, through a temporary
  // file in its own directory.
  fs::create_directories(dir.file("store"));
  const std::string real = dir.file("store/model.safetensors"), link = dir.file("latest.safetensors");
  save_safetensors(real, {{"old", HostTensor::f32({1}, {9.f})}});
  fs::create_symlink("store/model.safetensors", link);

  save_safetensors(link, new_tensors());
  ASSERT_TRUE(fs::is_symlink(link)) << "the link was replaced by a regular file";
  EXPECT_EQ(fs::read_symlink(link), fs::path("store/model.safetensors"));
  const SafetensorsFile through_link = load_safetensors(link);
  const SafetensorsFile direct = load_safetensors(real);
  EXPECT_EQ(direct.tensors.at("a").to_f64(), (std::vector<double>{1, 2}));
  EXPECT_FALSE(direct.tensors.contains("old"));
  EXPECT_EQ(through_link.tensors.at("a").to_f64(), (std::vector<double>{1, 2}));
  EXPECT_EQ(dir.listing(), (std::vector<std::string>{"latest.safetensors", "store"}));
  EXPECT_EQ(dir.listing("store"), std::vector<std::string>{"model.safetensors"});
}

TEST(SafeFileOutput, ADanglingLinkIsRefusedAndNothingIsCreated) {
  TempDir dir;
  const std::string link = dir.file("ckpt.safetensors");
  fs::create_symlink("nowhere.safetensors", link);
  expect_refused([&] { save_safetensors(link, new_tensors()); },
                 {link, "a symbolic link to 'nowhere.safetensors'", "cannot be followed", "No such file"});
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_FALSE(fs::exists(dir.file("nowhere.safetensors"))) << "the save created the link's target";
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST(SafeFileOutput, LinksToSpecialFilesAndLinkLoopsAreRefused) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("pipe").c_str(), 0600), 0);
  fs::create_directories(dir.file("folder"));
  fs::create_symlink("pipe", dir.file("to_pipe"));
  fs::create_symlink("folder", dir.file("to_folder"));
  fs::create_symlink("loop_b", dir.file("loop_a"));
  fs::create_symlink("loop_a", dir.file("loop_b"));
  expect_refused([&] { save_safetensors(dir.file("to_pipe"), new_tensors()); },
                 {"to_pipe", "a symbolic link to a FIFO (named pipe), not to a regular file"});
  expect_refused([&] { save_safetensors(dir.file("to_folder"), new_tensors()); },
                 {"to_folder", "a symbolic link to a directory"});
  expect_refused([&] { save_safetensors(dir.file("loop_a"), new_tensors()); },
                 {"loop_a", "cannot be followed", "Too many levels of symbolic links"});
  EXPECT_TRUE(S_ISFIFO(lstat_of(dir.file("pipe")).st_mode));
  EXPECT_TRUE(fs::is_symlink(dir.file("to_pipe")) && fs::is_symlink(dir.file("to_folder")));
  EXPECT_TRUE(fs::is_empty(dir.file("folder")));
  EXPECT_EQ(dir.listing(), (std::vector<std::string>{"folder", "loop_a", "loop_b", "pipe", "to_folder", "to_pipe"}));
}

struct Net : Module {
  Linear l1{*this, "l1", 2, 1};
};

Tensor net_loss(const Net& m, const Inputs& in) {
  Tensor r = m.l1(in.at("x")) - in.at("y");
  return mean(r * r);
}

TEST(SafeFileOutput, TrainingSaveRefusesAFifoAndStillSavesThroughALink) {
  TempDir dir;
  Net model;
  Training train = compile(TrainingSpec<Net>{.model = model,
                                             .loss = net_loss,
                                             .inputs = {{"x", {{2, 2}}}, {"y", {{2, 1}}}},
                                             .optimizer = {.kind = SgdConfig{}},
                                             .lr = 0.1,
                                             .seed = 3});
  const std::string fifo = dir.file("ckpt.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused([&] { train.save(fifo); }, {fifo, "a FIFO (named pipe), not a regular file"});
  EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode));

  save_safetensors(dir.file("real.safetensors"), new_tensors());
  fs::create_symlink("real.safetensors", dir.file("link.safetensors"));
  train.save(dir.file("link.safetensors"));
  EXPECT_TRUE(fs::is_symlink(dir.file("link.safetensors")));
  EXPECT_TRUE(load_safetensors(dir.file("real.safetensors")).tensors.contains("l1.W"));
}

}  // namespace
}  // namespace tg
