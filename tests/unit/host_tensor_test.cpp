// HostTensor's typed storage: each dtype in its own width, views of caller memory without a copy,
// shared elements that are copied on write, wide (double) tensors for the oracle, and what the
// interpreter hands back in each compute type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "support/library.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostStorage;
using tg::HostTensor;
using tg::RuntimeError;

TEST(HostTensor, FactoriesStoreEachDtypeInItsOwnWidth) {
  EXPECT_EQ(HostTensor::f32({2}, {1.5F, -2.0F}).storage(), HostStorage::f32);
  EXPECT_EQ(HostTensor::i32({2}, {7, -8}).storage(), HostStorage::i32);
  EXPECT_EQ(HostTensor::boolean({3}, std::vector<bool>{true, false, true}).storage(), HostStorage::u8);
  EXPECT_EQ(HostTensor::of({DType::f32, {2}}, {0.1, 0.2}).storage(), HostStorage::f64);
  EXPECT_EQ(HostTensor::filled({DType::i32, {2, 2}}, 3).storage(), HostStorage::i32);
  EXPECT_EQ(HostTensor::filled({DType::boolean, {}}, 1).to_f64(), (std::vector<double>{1}));
  const HostTensor zero;  // an f32 scalar 0
  EXPECT_EQ(zero.type, (tg::TensorType{DType::f32, {}}));
  EXPECT_EQ(zero.at(0), 0.0);
}

TEST(HostTensor, TheVectorFactoryTakesTheVectorWithoutCopying) {
  std::vector<float> data(1000, 2.0F);
  const float* where = data.data();
  const HostTensor t = HostTensor::f32({10, 100}, std::move(data));
  EXPECT_EQ(t.f32_data().data(), where);
  EXPECT_FALSE(t.is_view());
}

TEST(HostTensor, AViewReadsCallerMemoryAndAWriteCopiesItFirst) {
  std::vector<float> caller = {1, 2, 3, 4, 5, 6};
  HostTensor v = HostTensor::view({2, 3}, std::span<const float>(caller));
  EXPECT_TRUE(v.is_view());
  EXPECT_EQ(v.f32_data().data(), caller.data());
  caller[4] = 50;  // the view sees the caller's memory as it is now
  EXPECT_EQ(v.at(4), 50.0);
  v.set(0, -1);
  EXPECT_FALSE(v.is_view());
  EXPECT_EQ(caller[0], 1.0F) << "writing to a view must not write the caller's memory";
  EXPECT_EQ(v.to_f64(), (std::vector<double>{-1, 2, 3, 4, 50, 6}));

  const std::int32_t ints[] = {3, 1, 2};
  EXPECT_EQ(HostTensor::view({3}, std::span<const std::int32_t>(ints)).i32_data().data(), ints);
  const bool bits[] = {true, false};
  EXPECT_EQ(HostTensor::view({2}, std::span<const bool>(bits)).to_f64(), (std::vector<double>{1, 0}));
}

TEST(HostTensor, CopiesShareElementsUntilOneIsWritten) {
  HostTensor a = HostTensor::f32({3}, {1, 2, 3});
  HostTensor b = a;
  EXPECT_EQ(a.f32_data().data(), b.f32_data().data());
  b.mutable_f32()[1] = 20;
  EXPECT_NE(a.f32_data().data(), b.f32_data().data());
  EXPECT_EQ(a.to_f64(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(b.to_f64(), (std::vector<double>{1, 20, 3}));
  const float* own = b.f32_data().data();
  b.set(2, 30);  // b's elements are its own now: no further copy
  EXPECT_EQ(b.f32_data().data(), own);
}

TEST(HostTensor, WideStorageKeepsDoublesAndNarrowingRoundsThem) {
  const HostTensor wide = HostTensor::of({DType::f32, {2}}, {0.1, 1e300});
  EXPECT_EQ(wide.at(0), 0.1);
  const HostTensor narrow = wide.narrowed();
  EXPECT_EQ(narrow.storage(), HostStorage::f32);
  EXPECT_EQ(narrow.at(0), static_cast<double>(0.1F));
  EXPECT_TRUE(std::isinf(narrow.at(1)));
  EXPECT_EQ(narrow.narrowed().f32_data().data(), narrow.f32_data().data()) << "already narrow: no copy";
  HostTensor step = HostTensor::f32({1}, {1.0F});
  step.mutable_wide()[0] += 1e-12;  // finer than float resolves: the storage turns wide
  EXPECT_EQ(step.storage(), HostStorage::f64);
  EXPECT_EQ(step.at(0), 1.0 + 1e-12);
}

TEST(HostTensor, RefusesWrongCountsStoragesAndAdoptions) {
  EXPECT_THROW((void)HostTensor::f32({2, 3}, {1, 2, 3, 4, 5}), RuntimeError);
  EXPECT_THROW((void)HostTensor::i32({2}, std::vector<std::int32_t>{1}), RuntimeError);
  EXPECT_THROW((void)HostTensor::of({DType::i32, {1}}, {1, 2}), RuntimeError);
  const float one = 1;
  EXPECT_THROW((void)HostTensor::view({2}, std::span<const float>(&one, 1)), RuntimeError);
  const HostTensor ints = HostTensor::i32({1}, {4});
  try {
    (void)ints.f32_data();
    FAIL() << "an i32 tensor handed out f32 data";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("stored as i32, not f32"), std::string::npos) << e.what();
  }
  auto owner = std::make_shared<float>(1.0F);
  EXPECT_THROW((void)HostTensor::adopt({DType::i32, {}}, HostStorage::f32, owner, owner.get()), RuntimeError);
  EXPECT_THROW((void)HostTensor::adopt({DType::f32, {}}, HostStorage::f32, nullptr, owner.get()), RuntimeError);
}

TEST(HostTensor, EqualityComparesTypesAndValuesAcrossStorages) {
  EXPECT_EQ(HostTensor::f32({2}, {1, 2}), HostTensor::of({DType::f32, {2}}, {1, 2}));
  EXPECT_NE(HostTensor::f32({2}, {1, 2}), HostTensor::f32({2, 1}, {1, 2}));
  EXPECT_NE(HostTensor::f32({1}, {NAN}), HostTensor::f32({1}, {NAN}));
}

// interp_f32 results are f32 storage, the oracle's stay wide; a graph output that is a viewed
// input comes back as a copy, never as a view of the caller's memory.
TEST(HostTensor, TheInterpreterReturnsEachComputeTypesOwnStorage) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const tg::Tensor x = b.input("x", {DType::f32, {4}});
  b.output("y", x * 2.0F);
  b.output("same", x);
  b.output("index", tg::argmax(x, 0));
  const tg::Graph g = b.take();
  const std::vector<float> caller = {1, 4, 2, 3};
  const tg::TensorMap in{{"x", HostTensor::view({4}, std::span<const float>(caller))}};
  const auto f32 = tg::interpret(g, in, {.compute = ComputeType::f32}).outputs;
  EXPECT_EQ(f32.at("y").storage(), HostStorage::f32);
  EXPECT_EQ(f32.at("y").to_f64(), (std::vector<double>{2, 8, 4, 6}));
  EXPECT_EQ(f32.at("index").storage(), HostStorage::i32);
  EXPECT_EQ(f32.at("index").at(0), 1.0);
  EXPECT_FALSE(f32.at("same").is_view());
  EXPECT_NE(f32.at("same").f32_data().data(), caller.data());
  const auto f64 = tg::interpret(g, in, {.compute = ComputeType::f64}).outputs;
  EXPECT_EQ(f64.at("y").storage(), HostStorage::f64);
  EXPECT_EQ(f64.at("y").to_f64(), (std::vector<double>{2, 8, 4, 6}));
}

// at() and set() check the index against the element count in every storage; a refused set()
// copies nothing (a shared tensor stays shared, a view stays a view).
TEST(HostTensor, AtAndSetRefuseAnIndexPastTheEnd) {
  const auto expect_past_end = [](const std::function<void()>& call, const std::string& index,
                                  const std::string& count) {
    try {
      call();
      ADD_FAILURE() << "expected a RuntimeError for index " << index;
    } catch (const RuntimeError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("element index " + index + " is past the end"), std::string::npos) << what;
      EXPECT_NE(what.find("which has " + count + " elements"), std::string::npos) << what;
    }
  };
  const std::vector<float> caller = {1, 2, 3};
  const std::vector<HostTensor> tensors = {HostTensor::f32({2, 3}, {1, 2, 3, 4, 5, 6}), HostTensor::i32({3}, {1, 2, 3}),
                                           HostTensor::boolean({2}, std::vector<bool>{true, false}),
                                           HostTensor::of({DType::f32, {4}}, {1, 2, 3, 4}),
                                           HostTensor::view({3}, std::span<const float>(caller))};
  for (const HostTensor& t : tensors) {
    SCOPED_TRACE(t.type.to_string() + " stored as " + std::string(tg::host_storage_name(t.storage())));
    const std::string count = std::to_string(t.size());
    EXPECT_EQ(t.at(t.size() - 1), t.at_unchecked(t.size() - 1));
    expect_past_end([&] { (void)t.at(t.size()); }, count, count);
    expect_past_end([&] { (void)t.at(std::size_t{1} << 40); }, std::to_string(std::size_t{1} << 40), count);
    HostTensor copy = t;  // shares the elements (or views the same memory)
    expect_past_end([&] { copy.set(t.size(), 7); }, count, count);
    EXPECT_EQ(copy.raw_data(), t.raw_data()) << "a refused set() copied the elements";
    EXPECT_EQ(copy.is_view(), t.is_view());
    EXPECT_EQ(copy, t);
  }
  // A scalar has one element, an empty tensor none.
  expect_past_end([] { (void)HostTensor().at(1); }, "1", "1");
  const HostTensor empty = HostTensor::f32({0, 3}, std::vector<float>{});
  expect_past_end([&] { (void)empty.at(0); }, "0", "0");
}

}  // namespace
