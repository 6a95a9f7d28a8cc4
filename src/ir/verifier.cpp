// STUB
#include "tensorgrad/ir/verifier.h"
namespace tg {
void verify(const Graph&) {}
}
