#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
RC_GTEST_PROP(Smoke, Trivial, (int x)) { RC_ASSERT(x == x); }
