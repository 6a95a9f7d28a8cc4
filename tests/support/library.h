#pragma once
// The public API for the tests: everything tensorgrad/tensorgrad.h includes except the headers
// generated from ops.def (tensorgrad/ir/ops/ids*.h). A test that names an op constant or calls a
// front-end function declared by an ops.def line includes that family's header
// (tensorgrad/ir/ops/ids/<family>.h) itself, so adding an op recompiles only the tests of its
// family, not all of them (docs/adding-an-op.md, "The fast loop").
#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/attrs.h"
#include "tensorgrad/ir/dtype.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/launch_paths.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/shape.h"
#include "tensorgrad/ir/tensor.h"
#include "tensorgrad/ir/text.h"
#include "tensorgrad/ir/verifier.h"
#include "tensorgrad/passes/autodiff.h"
#include "tensorgrad/passes/optimizer.h"
#include "tensorgrad/runtime/session.h"
#include "tensorgrad/train/capture.h"
#include "tensorgrad/train/init.h"
#include "tensorgrad/train/module.h"
#include "tensorgrad/train/nn.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/train/schedule.h"
#include "tensorgrad/train/training.h"
