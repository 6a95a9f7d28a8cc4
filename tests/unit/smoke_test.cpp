#include <gtest/gtest.h>
#include "tensorgrad/tensorgrad.h"
TEST(Smoke, Links) { EXPECT_EQ(tg::op_name(tg::OpId::Add), "add"); }
