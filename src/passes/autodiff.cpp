// STUB
#include "tensorgrad/passes/autodiff.h"
#include "tensorgrad/ir/error.h"
namespace tg {
Graph differentiate(const Graph&, const GradOptions&) { throw Error("not yet"); }
}
